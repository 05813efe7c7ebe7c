package e2e

import (
	"context"
	"testing"
	"time"
)

// The primary's mysqld dies while its agent lives: the agent notices at its
// next iteration and releases the lock at once, so a replica takes over long
// before the lock could have expired.
func TestPrimaryMysqldDies(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-crash")
	survivors := c.Others(old)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader := c.WatchLeader(ctx)

	killed := time.Now()
	old.KillMySQL()
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	win := FirstWrite(survivors, "mysqld-died", 20*time.Millisecond, limit)
	if win.Member == nil {
		t.Fatalf("no survivor accepted an application write within %v of killing %s's mysqld\n%s", limit, old.Name, c.describe())
	}
	took := win.At.Sub(killed)
	t.Logf("%s accepted the first write %v after %s's mysqld was killed", win.Member.Name, took.Round(time.Millisecond), old.Name)

	// Had the agent left the lock to expire, it would have vanished no
	// sooner than ttl - loop_wait after the kill (renewed at most one
	// loop_wait before it): 4 s with the defaults. A release comes within
	// one loop_wait plus the failed observation and the delete.
	releaseBound := c.Timing.LoopWait + c.Timing.RetryTimeout + 500*time.Millisecond
	expiryEarliest := c.Timing.TTL - c.Timing.LoopWait
	var released time.Time
	for released.IsZero() {
		select {
		case e := <-leader:
			if e.Holder == "" {
				released = e.At
			} else if e.Holder == old.Name {
				t.Fatalf("%s rewrote the leader key after its mysqld died", old.Name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the leader key was never deleted after %s's mysqld died; a new primary took writes all the same?\n%s", old.Name, c.describe())
		}
	}
	t.Logf("leader key deleted %v after the kill", released.Sub(killed).Round(time.Millisecond))
	if d := released.Sub(killed); d > releaseBound {
		t.Errorf("the lock was deleted %v after mysqld died, want <= %v (loop_wait + retry_timeout + 0.5 s): "+
			"the agent did not release it promptly (expiry alone would take >= %v)", d, releaseBound, expiryEarliest)
	}
	// A new primary well before expiry could even have happened: a release,
	// then a promotion on the watch event, with a margin for a loaded machine.
	if took >= expiryEarliest-500*time.Millisecond {
		t.Errorf("first write on the new primary %v after mysqld died, want < %v (ttl - loop_wait - 0.5 s): "+
			"as slow as waiting for the lock to expire", took, expiryEarliest-500*time.Millisecond)
	}

	if p := c.WaitHealthy(30*time.Second, old); p != win.Member {
		t.Fatalf("the API names %s the primary, but %s took the first write", p.Name, win.Member.Name)
	}
	if st := old.Status(); st == nil || st.HoldsLock || st.Healthy || st.Role == "primary" {
		t.Errorf("%s: the agent of the dead mysqld reports %s, want unhealthy, no lock, not primary", old.Name, st)
	}
	c.WriteAndReplicate(win.Member, "after-crash", old)

	// mysqld comes back under its living agent, which makes it a replica.
	old.RestartMySQL()
	if p := c.WaitHealthy(30 * time.Second); p != win.Member {
		t.Fatalf("after %s's mysqld restarted the primary is %s, want %s", old.Name, p.Name, win.Member.Name)
	}
	c.WriteAndReplicate(win.Member, "after-restart")
	sb.Stop()
	sb.ExpectAlive()
}
