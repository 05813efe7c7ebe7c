package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// The primary's mysqld hangs (SIGSTOP, as on a stalled disk) for longer than
// ttl while its agent lives, then resumes. A hung server neither answers nor
// refuses: its agent cannot fence it, and cannot tell it from a dead one. It
// may keep the lock (no failover while the server hangs) or give it up, but
// if a replica takes over, the resumed server must not take writes next to
// it: never two writable servers, and no client write acknowledged by the
// old primary after the new one acknowledged a write.
//
// Known bug KB2: the agent releases the lock although its fence timed out,
// a replica takes over within a second, and the resumed server takes writes
// until its agent's next iteration fences it.
func TestPrimaryMysqldHangs(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartSplitBrainChecker()
	sb.KnownBug = "KB2"
	c.WriteAndReplicate(old, "before-hang")
	survivors := c.Others(old)

	// A client that keeps writing to the server it believes is the primary.
	var (
		mu    sync.Mutex
		acked []time.Time
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := old.Write(fmt.Sprintf("old-client-%d", n)); err == nil {
				mu.Lock()
				acked = append(acked, time.Now())
				mu.Unlock()
			}
		}
	}()
	defer func() { close(stop); <-done }()

	hang := c.Timing.TTL + 2*c.Timing.LoopWait
	wins := make(chan WriteWin, 1)
	hung := time.Now()
	old.FreezeMySQL()
	go func() { wins <- FirstWrite(survivors, "while-hung", 20*time.Millisecond, hang+5*time.Second) }()
	time.Sleep(hang) // the hang itself
	thawed := time.Now()
	old.ThawMySQL()
	win := <-wins

	if win.Member == nil {
		// The agent kept the lock through the hang: the old primary must be
		// the primary again.
		t.Logf("no failover while %s's mysqld hung for %v (known bug KB2 did not reproduce)", old.Name,
			thawed.Sub(hung).Round(time.Millisecond))
		if p := c.WaitHealthy(30 * time.Second); p != old {
			t.Fatalf("no replica took writes during the hang, yet afterwards the primary is %s, not %s", p.Name, old.Name)
		}
	} else {
		t.Logf("%s took over %v after %s's mysqld hung (it resumed after %v)", win.Member.Name,
			win.At.Sub(hung).Round(time.Millisecond), old.Name, thawed.Sub(hung).Round(time.Millisecond))
		waitFor(t, 30*time.Second, old.Name+" to be read-only after resuming", func() (bool, string) {
			ro, err := old.ReadOnly()
			return err == nil && ro, fmt.Sprintf("read_only=%v err=%v", ro, err)
		})
		if p := c.WaitHealthy(30*time.Second, old); p != win.Member {
			t.Fatalf("the primary is %s, but %s took the first write", p.Name, win.Member.Name)
		}
		mu.Lock()
		for _, at := range acked {
			if at.After(win.At) {
				knownBug(t, "KB2", "%s acknowledged a client write at %s, after the new primary %s acknowledged one at %s",
					old.Name, stamp(at), win.Member.Name, stamp(win.At))
			}
		}
		mu.Unlock()
	}
	sb.Stop()
	sb.ExpectAlive()
}
