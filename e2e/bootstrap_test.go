package e2e

import (
	"fmt"
	"testing"
	"time"
)

// Three agents start at once on three empty, read-only servers: exactly one
// wins the lock and becomes the writable primary, the two others become
// read-only replicas that replicate its writes.
func TestBootstrap(t *testing.T) {
	c := NewCluster(t, Options{})
	start := time.Now() // the agents have just been started
	sb := c.StartMonitor()

	p := c.WaitHealthy(60 * time.Second)
	t.Logf("bootstrap: %s is the primary %v after the agents started", p.Name, time.Since(start).Round(time.Millisecond))

	// The API serves nothing to a caller without the cluster's token.
	c.CheckAPIClosed(t)

	// The DCS, every agent and every server agree on who leads.
	if h, err := c.LeaderHolder(); err != nil || h != p.Name {
		t.Errorf("leader key holder = %q (err %v), want %s", h, err, p.Name)
	}
	for _, m := range c.Members {
		st := m.Status()
		if st == nil || st.Leader != p.Name {
			t.Errorf("%s: /status leader = %v, want %s", m.Name, st, p.Name)
		}
		if got := m.IsPrimaryAPI(); got != (m == p) {
			t.Errorf("%s: GET /primary 200 = %v, want %v", m.Name, got, m == p)
		}
		if ro := m.MustReadOnly(t); ro != (m != p) {
			t.Errorf("%s: @@read_only = %v, want %v", m.Name, ro, m != p)
		}
	}
	for _, r := range c.Others(p) {
		rs, err := r.ReplicaStatus()
		if err != nil || !rs.Streaming() || rs.SourcePort != fmt.Sprint(p.Server.Port) || rs.UsingGTID != "Slave_Pos" {
			t.Errorf("%s: SHOW SLAVE STATUS = %s (err %v), want streaming from %s with Using_Gtid=Slave_Pos", r.Name, rs, err, p.Server.Addr())
		}
	}

	// Writes as the application user: accepted on the primary and applied
	// on both replicas; refused by both replicas.
	c.EnsureTable(p)
	c.WriteAndReplicate(p, "bootstrap-1")
	for _, r := range c.Others(p) {
		if err := r.Write("on-a-replica"); !isReadOnlyError(err) {
			t.Errorf("%s: application write on a replica: got %v, want the read-only refusal (1290)", r.Name, err)
		}
	}
	primaryPos, err := p.GTIDBinlogPos()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Others(p) {
		waitFor(t, 5*time.Second, r.Name+" to have executed the primary's GTIDs", func() (bool, string) {
			pos, err := r.GTIDBinlogPos()
			return err == nil && pos == primaryPos, fmt.Sprintf("%s has %q, primary %s has %q (%v)", r.Name, pos, p.Name, primaryPos, err)
		})
	}

	sb.Stop()
	sb.ExpectAlive()
}
