package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestLosslessNofailoverAcknowledgerKeepsTheWrite is issue 20's first
// sequence on real MariaDB: in lossless mode a write is acknowledged by a
// member that may never lead (--nofailover) alone, because the only
// eligible replica's receiver is stopped; the primary then dies (kill -9).
// The eligible replica promotes, and must first take the write from the
// nofailover member: without that it became writable without the row,
// and the member that held it was left errant.
func TestLosslessNofailoverAcknowledgerKeepsTheWrite(t *testing.T) {
	c := NewCluster(t, losslessOptions)
	old := c.Bootstrap()
	others := c.Others(old)
	eligible, tagged := others[0], others[1]
	tagged.restartAgentWith("--nofailover")
	c.WaitHealthy(30 * time.Second)
	c.WriteAndReplicate(old, "before")
	sb := c.StartMonitor()

	// Keep the eligible replica's receiver stopped: its agent, frozen,
	// cannot restart it before the primary is gone.
	eligible.FreezeAgent()
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	if _, err := eligible.root.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		t.Fatalf("stopping %s's receiver: %v", eligible.Name, err)
	}
	start := time.Now()
	if err := old.Write("acknowledged-by-nofailover-only"); err != nil {
		t.Fatalf("the write acknowledged by %s alone failed: %v\n%s", tagged.Name, err, c.describe())
	}
	acked := time.Since(start)
	old.KillAgent()
	old.KillMySQL()
	if eligible.HasRow("acknowledged-by-nofailover-only") {
		t.Fatalf("%s received the write although its receiver was stopped: the scenario proves nothing", eligible.Name)
	}
	eligible.ThawAgent()

	var took time.Duration
	waitFor(t, 40*time.Second, eligible.Name+" to become the writable primary", func() (bool, string) {
		took = time.Since(start)
		if st := eligible.Status(); st != nil && st.Writable {
			return true, ""
		}
		return false, c.describe()
	})
	if !eligible.HasRow("acknowledged-by-nofailover-only") {
		t.Fatalf("%s became writable without the write that %s acknowledged:\n%s", eligible.Name, tagged.Name, c.describe())
	}
	waitFor(t, 20*time.Second, tagged.Name+" to replicate from the new primary with nothing errant", func() (bool, string) {
		st := tagged.Status()
		return st != nil && st.Errant == "" && st.Replication == "running" && st.Leader == eligible.Name, fmt.Sprint(st)
	})
	r := sb.Stop()
	t.Logf("write acknowledged by %s alone in %v; %s writable with it %v after the write; %s streams from it, not errant; "+
		"1 acknowledged, 0 lost; %d instants judged from %d reads, %d with two writable",
		tagged.Name, ms(acked), eligible.Name, ms(took), tagged.Name, r.Ticks, sb.Samples(), r.DualWritable)
}
