package e2e

import (
	"sync"
	"testing"
	"time"
)

// The dead-man switch: kill -9 of the primary's agent, which stays dead,
// and its mysqld cut from its peers (black-holed proxy) but not from a
// client. No peer can fence it, so the peers promote once the lock expires,
// relying on the old primary's self-fence, which only the event inside its
// mysqld can still carry out. The client's writes to the old primary must
// be refused before any peer accepts one.
func TestDeadAgentPrimaryFencesItself(t *testing.T) {
	c := NewCluster(t, Options{MySQLProxies: true})
	old := c.Bootstrap()
	c.WriteAndReplicate(old, "before-death")
	sb := c.StartMonitor()

	old.KillAgent()
	old.Proxy.BlackHole()
	killed := time.Now()
	if err := old.WriteProbe(); err != nil {
		t.Fatalf("%s: right after its agent died its mysqld should still take writes, got %v", old.Name, err)
	}

	// The client keeps writing to the old primary, as one that still
	// reaches it would; refused is when it first could not.
	var (
		mu      sync.Mutex
		refused time.Time
	)
	stop := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for tick := time.NewTicker(20 * time.Millisecond); ; {
			select {
			case <-stop:
				tick.Stop()
				return
			case <-tick.C:
			}
			if err := old.WriteProbe(); isReadOnlyError(err) {
				mu.Lock()
				refused = time.Now()
				mu.Unlock()
				tick.Stop()
				return
			}
		}
	}()

	var oldRO bool
	var oldROErr error
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	win := FirstWriteThen(c.Others(old), "dead-agent", 20*time.Millisecond, limit, func(WriteWin) {
		oldRO, oldROErr = old.ReadOnly()
	})
	close(stop)
	<-probed
	if win.Member == nil {
		t.Fatalf("no survivor accepted a write within %v of killing %s's agent\n%s", limit, old.Name, c.describe())
	}
	mu.Lock()
	defer mu.Unlock()
	if refused.IsZero() || !refused.Before(win.At) {
		t.Fatalf("%s accepted a write %v after %s's agent died, but the old primary had not refused one yet (refused %v): two writable primaries",
			win.Member.Name, win.At.Sub(killed).Round(time.Millisecond), old.Name, refused)
	}
	if oldROErr != nil || !oldRO {
		t.Errorf("when %s acknowledged its first write, %s had read_only=%v (err %v)", win.Member.Name, old.Name, oldRO, oldROErr)
	}
	r := sb.Stop()
	t.Logf("after %s's agent died: its mysqld refused writes at %v, %s accepted the first write at %v; "+
		"%d instants judged from %d reads, %d with two writable", old.Name, refused.Sub(killed).Round(time.Millisecond),
		win.Member.Name, win.At.Sub(killed).Round(time.Millisecond), r.Ticks, sb.Samples(), r.DualWritable)
}
