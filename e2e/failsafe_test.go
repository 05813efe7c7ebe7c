package e2e

import (
	"fmt"
	"testing"
	"time"
)

// failsafeOptions: the agents bootstrap with failsafe mode on, each reaching
// etcd through a proxy of its own.
var failsafeOptions = Options{AgentArgs: []string{"--failsafe"}, DCSProxies: true}

// keepsWriting writes on primary every 100 ms for d and fails the test at
// the first refused write: the primary was demoted.
func keepsWriting(t *testing.T, primary *Member, d time.Duration) int {
	t.Helper()
	n := 0
	for start := time.Now(); time.Since(start) < d; n++ {
		if err := primary.Write(fmt.Sprintf("failsafe-%d", n)); err != nil {
			t.Fatalf("%s refused a write %v into the outage: %v", primary.Name, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

// The DCS stops for good: every member confirms the primary over HTTP, so it
// is never demoted, and nobody else becomes writable.
func TestFailsafeDCSStopped(t *testing.T) {
	c := NewCluster(t, failsafeOptions)
	primary := c.Bootstrap()
	sb := c.StartMonitor()
	c.Etcd.Stop()
	n := keepsWriting(t, primary, 4*c.Timing.TTL)
	t.Logf("%s took %d writes in %v with etcd stopped", primary.Name, n, 4*c.Timing.TTL)
	sb.Stop()
	sb.ExpectAlive()
}

// The primary's agent alone loses the DCS; its peers still reach it and
// see its lock expire, but they confirmed it and do not race: no demotion,
// no second primary. Healed, one member leads again: etcd expired the
// lock's lease during the cut, so the primary's next renewal fails, it
// fences, and the members race on equal data; CI saw a peer win. Until
// that renewal the old status still reads healthy, so the test waits for
// the lock to be taken again first.
func TestFailsafePrimaryCutFromDCS(t *testing.T) {
	c := NewCluster(t, failsafeOptions)
	primary := c.Bootstrap()
	sb := c.StartMonitor()
	primary.DCSProxy.BlackHole()
	n := keepsWriting(t, primary, 4*c.Timing.TTL)
	t.Logf("%s took %d writes in %v cut off from etcd", primary.Name, n, 4*c.Timing.TTL)
	if holder, err := c.LeaderHolder(); holder != "" || err != nil {
		t.Fatalf("the lock outlived its lease in etcd: holder %q (%v)", holder, err)
	}
	primary.DCSProxy.Heal()
	waitFor(t, 60*time.Second, "a member to take the leader lock after the heal", func() (bool, string) {
		h, err := c.LeaderHolder()
		return err == nil && h != "", fmt.Sprintf("holder %q (err %v)", h, err)
	})
	p := c.WaitHealthy(60 * time.Second)
	t.Logf("after healing, %s leads", p.Name)
	c.WriteAndReplicate(p, "after-heal")
	sb.Stop()
	sb.ExpectAlive()
}
