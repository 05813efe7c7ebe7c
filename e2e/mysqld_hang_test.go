package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The primary's mysqld hangs (SIGSTOP, as on a stalled disk) while its
// agent lives. A hung server neither answers nor refuses, so no SQL can
// fence it. Its agent, which sees the process (same host here; a pod with
// shareProcessNamespace in Kubernetes), kills it once it has hung for ttl,
// finds it down and releases the lock: a replica takes over within
// ttl + 10 s, and the old server cannot resume writable next to it.
func TestPrimaryMysqldHangs(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-hang")

	win := hangUntilTakeover(t, c, old)
	if _, err := old.ReadOnly(); err == nil {
		t.Fatalf("%s's hung mysqld answers after the failover: it was not killed", old.Name)
	}
	if !slices.ContainsFunc(old.LogSince("SIGSTOP mysqld"), func(l string) bool { return strings.Contains(l, "killed the hung local mysqld") }) {
		t.Errorf("%s's agent did not log the kill", old.Name)
	}

	// The pod's mysqld container restarts (here: the test), read-only,
	// and the old primary rejoins as a replica.
	old.KillMySQL() // reaps the killed process, so that it can start again
	old.RestartMySQL()
	if p := c.WaitHealthy(60 * time.Second); p != win.Member {
		t.Fatalf("the primary is %s, but %s took the first write", p.Name, win.Member.Name)
	}
	if !old.HasRow(win.Tag) {
		t.Errorf("%s rejoined without the new primary's first write", old.Name)
	}
	sb.Stop()
	sb.ExpectAlive()
}

// hangUntilTakeover freezes old's mysqld and waits, within ttl + 10 s, for
// another member to take a write.
func hangUntilTakeover(t *testing.T, c *Cluster, old *Member) WriteWin {
	t.Helper()
	bound := c.Timing.TTL + 10*time.Second
	hung := time.Now()
	old.FreezeMySQL()
	win := FirstWrite(c.Others(old), "while-hung", 20*time.Millisecond, bound)
	if win.Member == nil {
		t.Fatalf("no replica took a write within %v of %s's mysqld hanging\n%s", bound, old.Name, c.describe())
	}
	t.Logf("%s took over %v after %s's mysqld hung", win.Member.Name, win.At.Sub(hung).Round(time.Millisecond), old.Name)
	return win
}

// In lossless mode, with the kill switched off, the holder of a hung mysqld
// gives the lock up unfenced after ttl. The new primary stops every
// receiver before it unfences, so when the old server resumes (SIGCONT) it
// collects no acknowledgement: a client that kept writing to it gets no
// write acknowledged after the new primary's first, and its agent fences it.
func TestLosslessPrimaryMysqldHangs(t *testing.T) {
	o := losslessOptions
	o.AgentArgs = append([]string{"--kill-hung-mysqld=false"}, o.AgentArgs...)
	c := NewCluster(t, o)
	old := c.Bootstrap()
	c.WriteAndReplicate(old, "before-hang")

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

	win := hangUntilTakeover(t, c, old)
	old.ThawMySQL()
	waitFor(t, 30*time.Second, old.Name+" to be read-only after resuming", func() (bool, string) {
		ro, err := old.ReadOnly()
		return err == nil && ro, fmt.Sprintf("read_only=%v err=%v", ro, err)
	})
	mu.Lock()
	for _, at := range acked {
		if at.After(win.At) {
			t.Errorf("%s acknowledged a client write at %s, after the new primary %s acknowledged one at %s",
				old.Name, stamp(at), win.Member.Name, stamp(win.At))
		}
	}
	mu.Unlock()
	if p := c.WaitHealthy(60*time.Second, old); p != win.Member {
		t.Fatalf("the primary is %s, but %s took the first write", p.Name, win.Member.Name)
	}
}

// BenchmarkHungPrimary: SIGSTOP of the primary's mysqld, with its agent
// alive, 5 trials per mode: the time from the hang to the first write a
// replica acknowledges. async: the agent kills the hung server (the
// shipped default); lossless: semi_sync strict with the kill switched off,
// so the holder releases the lock unfenced.
func BenchmarkHungPrimary(b *testing.B) {
	const trials = 5
	modes := []struct {
		name string
		opts Options
	}{
		{"async-kill", Options{}},
		{"lossless-release", Options{AgentArgs: append([]string{"--kill-hung-mysqld=false"}, losslessOptions.AgentArgs...),
			MySQLArgs: losslessOptions.MySQLArgs}},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			measureOnce(b, func() []benchFigure {
				c := NewCluster(b, mode.opts)
				c.Bootstrap()
				var outages []time.Duration
				for i := range trials {
					old := c.WaitHealthy(60 * time.Second)
					c.WriteAndReplicate(old, fmt.Sprintf("trial-%d", i))
					hung := time.Now()
					old.FreezeMySQL()
					win := FirstWrite(c.Others(old), fmt.Sprintf("hung-%d", i), 20*time.Millisecond, c.Timing.TTL+30*time.Second)
					if win.Member == nil {
						b.Fatalf("trial %d: no replica took a write\n%s", i+1, c.describe())
					}
					outages = append(outages, win.At.Sub(hung))
					fmt.Printf("%s trial %d: %s -> %s after %v\n", b.Name(), i+1, old.Name, win.Member.Name, ms(win.At.Sub(hung)))
					old.ThawMySQL() // resumes the lossless server; a no-op on the killed one
					old.KillMySQL()
					old.RestartMySQL()
					if p := c.WaitHealthy(60 * time.Second); p != win.Member {
						b.Fatalf("trial %d: primary %s, want %s", i+1, p.Name, win.Member.Name)
					}
				}
				slices.Sort(outages)
				p50, worst := percentile(outages, 50), outages[len(outages)-1]
				fmt.Printf("%s: hung primary mysqld, %d trials: first write on a replica p50 %.3f s, max %.3f s (bound ttl + 10 s = %v)\n",
					b.Name(), trials, p50.Seconds(), worst.Seconds(), c.Timing.TTL+10*time.Second)
				return []benchFigure{{p50.Seconds(), "p50-s"}, {worst.Seconds(), "max-s"}}
			})
		})
	}
}
