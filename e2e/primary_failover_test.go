package e2e

import (
	"testing"
	"time"
)

// kill -9 of the primary's mysqld and of its agent, as when its node dies:
// a replica takes the lock once it expires, becomes the writable primary,
// and the other replica follows it. Never two writable servers.
func TestPrimaryFailover(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	hardFailover(t, c, old)
}

// hardFailover kills old's agent and mysqld and checks the failover that
// follows; it returns the new primary. The scenario ends with old down.
func hardFailover(t *testing.T, c *Cluster, old *Member) *Member {
	t.Helper()
	sb := c.StartMonitor()
	// Everything acknowledged so far is on both replicas, so whichever wins
	// must have it.
	c.WriteAndReplicate(old, "before-failover")
	survivors := c.Others(old)

	killed := time.Now()
	old.KillAgent()
	old.KillMySQL()
	// The lock expires ttl after the last renewal; allow that, a loop or
	// two, and a wide margin for a loaded machine. BenchmarkFailover
	// measures the real figure.
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	win := FirstWrite(survivors, "failover", 20*time.Millisecond, limit)
	if win.Member == nil {
		t.Fatalf("no survivor accepted an application write within %v of killing %s\n%s", limit, old.Name, c.describe())
	}
	if len(win.AlsoAccepted) > 0 {
		t.Errorf("%s accepted the first write, but %v accepted writes too", win.Member.Name, win.AlsoAccepted)
	}
	newPrimary := win.Member
	t.Logf("%s accepted the first write %v after %s's agent and mysqld were killed",
		newPrimary.Name, win.At.Sub(killed).Round(time.Millisecond), old.Name)

	if p := c.WaitHealthy(30*time.Second, old); p != newPrimary {
		t.Fatalf("the API names %s the primary, but %s took the first write", p.Name, newPrimary.Name)
	}
	if h, err := c.LeaderHolder(); err != nil || h != newPrimary.Name {
		t.Errorf("leader key holder = %q (err %v), want %s", h, err, newPrimary.Name)
	}
	if !newPrimary.HasRow("before-failover") {
		t.Errorf("%s lacks the row acknowledged and replicated before the failover", newPrimary.Name)
	}
	// The surviving replica replicates from the new primary: the first write
	// and a new one arrive on it.
	c.WriteAndReplicate(newPrimary, "after-failover", old)
	for _, r := range c.Others(old, newPrimary) {
		if !r.HasRow(win.Tag) {
			t.Errorf("%s lacks the new primary's first write %q", r.Name, win.Tag)
		}
	}
	sb.Stop()
	sb.ExpectAlive()
	return newPrimary
}
