package e2e

import (
	"sync"
	"testing"
	"time"
)

// kill -9 of the primary's agent alone: its mysqld keeps running, writable,
// and keeps taking application writes until the new leader fences it. The
// new leader must fence it before it unfences itself, so at the moment the
// new primary acknowledges its first write the old one refuses writes.
func TestPrimaryAgentKilled(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-kill")
	survivors := c.Others(old)

	killed := time.Now()
	old.KillAgent()
	// The premise: without its agent the old mysqld still takes writes.
	if err := old.WriteProbe(); err != nil {
		t.Fatalf("%s: right after its agent died its mysqld should still take writes, got %v", old.Name, err)
	}

	var (
		mu       sync.Mutex
		oldRO    bool
		oldROErr error
		oldProbe error
	)
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	win := FirstWriteThen(survivors, "agent-killed", 20*time.Millisecond, limit, func(WriteWin) {
		ro, err := old.ReadOnly()
		probe := old.WriteProbe()
		mu.Lock()
		oldRO, oldROErr, oldProbe = ro, err, probe
		mu.Unlock()
	})
	if win.Member == nil {
		t.Fatalf("no survivor accepted an application write within %v of killing %s's agent\n%s", limit, old.Name, c.describe())
	}
	t.Logf("%s accepted the first write %v after %s's agent was killed", win.Member.Name,
		win.At.Sub(killed).Round(time.Millisecond), old.Name)
	mu.Lock()
	if oldROErr != nil || !oldRO {
		t.Errorf("when %s acknowledged its first write, the old primary %s had read_only=%v (err %v): two writable primaries",
			win.Member.Name, old.Name, oldRO, oldROErr)
	}
	if oldProbe == nil {
		t.Errorf("when %s acknowledged its first write, the old primary %s still accepted an application write", win.Member.Name, old.Name)
	}
	mu.Unlock()
	if len(win.AlsoAccepted) > 0 {
		t.Errorf("%s accepted the first write, but %v accepted writes too", win.Member.Name, win.AlsoAccepted)
	}

	newPrimary := c.WaitHealthy(30*time.Second, old)
	if newPrimary != win.Member {
		t.Fatalf("the API names %s the primary, but %s took the first write", newPrimary.Name, win.Member.Name)
	}
	c.WriteAndReplicate(newPrimary, "after-kill", old)
	if !old.MustReadOnly(t) {
		t.Errorf("%s: the old primary is writable again", old.Name)
	}

	// With its agent back, the old primary follows the new one: it has
	// nothing the new primary lacks (no write reached it after the kill).
	old.StartAgent()
	if p := c.WaitHealthy(30 * time.Second); p != newPrimary {
		t.Fatalf("after %s's agent restarted the primary is %s, want %s", old.Name, p.Name, newPrimary.Name)
	}
	c.WriteAndReplicate(newPrimary, "after-agent-restart")
	sb.Stop()
	sb.ExpectAlive()
}
