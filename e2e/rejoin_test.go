package e2e

import (
	"fmt"
	"testing"
	"time"
)

// After a hard failover (TestPrimaryFailover), the old primary's mysqld and
// agent are started again: it stays read-only and ends as a replica of the
// new primary, since it has no transaction the new primary lacks.
func TestOldPrimaryRejoins(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	newPrimary := hardFailover(t, c, old)

	sb := c.StartMonitor()
	restarted := time.Now()
	old.RestartMySQL()
	if !old.MustReadOnly(t) {
		t.Errorf("%s: mysqld came back writable before its agent started", old.Name)
	}
	old.StartAgent()

	p := c.WaitHealthy(30 * time.Second)
	if p != newPrimary {
		t.Fatalf("after the rejoin the primary is %s, want %s (the old primary must not take over again)", p.Name, newPrimary.Name)
	}
	t.Logf("%s replicates from %s %v after its mysqld was restarted", old.Name, newPrimary.Name,
		time.Since(restarted).Round(time.Millisecond))
	if st := old.Status(); st == nil || st.Role != "replica" || st.HoldsLock || st.Errant != "" {
		t.Errorf("%s: /status = %s, want a replica without the lock and without errant transactions", old.Name, st)
	}
	c.WriteAndReplicate(newPrimary, "after-rejoin")
	want, err := newPrimary.GTIDBinlogPos()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, old.Name+" to have executed the primary's GTIDs", func() (bool, string) {
		pos, err := old.GTIDBinlogPos()
		return err == nil && pos == want, fmt.Sprintf("%s has %q, %s has %q (%v)", old.Name, pos, newPrimary.Name, want, err)
	})

	sb.Stop()
	sb.ExpectAlive()
	for _, e := range sb.Events() {
		if e.Member == old.Name && e.Writable {
			t.Errorf("%s was writable at %s while rejoining", old.Name, stamp(e.At))
		}
	}
}
