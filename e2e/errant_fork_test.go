package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A replica that writes a transaction of its own while its agent is down
// forks from the primary's history, even though its GTID position (one GTID
// per domain, at a lower seq_no than the primary's) looks merely behind.
// Its agent must see the fork in the binlog state, report the member errant
// and keep it out of candidacy, never replicate over it.
func TestErrantForkBehindThePrimary(t *testing.T) {
	c := NewCluster(t, Options{})
	primary := c.Bootstrap()
	replica := c.Others(primary)[0]

	replica.KillAgent()
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	// As root, bypassing read_only: what an operator's stray write does.
	if _, err := replica.root.ExecContext(ctx, "INSERT INTO app.e2e (tag) VALUES ('stray')"); err != nil {
		t.Fatalf("writing on %s as root: %v", replica.Name, err)
	}
	for i := range 20 { // the primary moves well past the replica's seq_no
		if err := primary.Write(fmt.Sprintf("after-stray-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	replica.StartAgent()
	waitFor(t, 20*time.Second, replica.Name+" to report errant transactions", func() (bool, string) {
		st := replica.Status()
		return st != nil && st.Errant != "" && st.Role != "replica", fmt.Sprintf("/status = %s", st)
	})
	st := replica.Status()
	if !strings.Contains(st.Errant, fmt.Sprintf("-%d-", replica.Server.ServerID)) {
		t.Errorf("errant %q does not name %s's own server id %d", st.Errant, replica.Name, replica.Server.ServerID)
	}
	if replica.HasRow("after-stray-19") {
		t.Errorf("%s replicated over its diverged history", replica.Name)
	}
}
