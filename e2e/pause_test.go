package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// `agentctl pause`, then kill -9 of the primary's agent and mysqld: in
// maintenance mode nobody fails over, for well over ttl and after the dead
// leader's lock has expired; `agentctl resume --wait` brings failover back
// and returns once a new primary accepts writes.
func TestPauseResume(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-pause")
	survivors := c.Others(old)

	r := c.MustCtl("pause")
	if !strings.Contains(r.Stdout, "Paused") {
		t.Errorf("agentctl pause output lacks \"Paused\":\n%s", r)
	}
	// Every agent has seen the pause before the kill: the scenario is about
	// a paused cluster, not about how fast the pause propagates.
	waitFor(t, 10*time.Second, "every agent to report paused", func() (bool, string) {
		for _, m := range c.Members {
			if st := m.Status(); st == nil || !st.Paused {
				return false, fmt.Sprintf("%s: %s (paused=%v)", m.Name, st, st != nil && st.Paused)
			}
		}
		return true, ""
	})
	if cs := c.CtlStatus(); !cs.Paused || cs.Leader != old.Name {
		t.Errorf("agentctl status: paused=%v leader=%q, want paused with leader %s", cs.Paused, cs.Leader, old.Name)
	}
	// Paused does not stop the primary: it keeps taking writes.
	c.WriteAndReplicate(old, "while-paused")

	killed := time.Now()
	old.KillAgent()
	old.KillMySQL()

	// Hands off for 2 x ttl, and for at least ttl after the dead leader's lock
	// has expired (its etcd lease lapses about ttl after the last renewal):
	// nobody takes the lock, nobody becomes writable, the survivors stay
	// read-only replicas.
	ttl := c.Timing.TTL
	var expired time.Time
	for {
		now := time.Now()
		holder, err := c.LeaderHolder()
		switch {
		case err != nil:
			t.Fatalf("reading the leader key: %v", err)
		case holder == "" && expired.IsZero():
			expired = now
			t.Logf("the dead leader's lock expired %v after the kill", ms(now.Sub(killed)))
		case holder != "" && holder != old.Name:
			t.Fatalf("%s took the lock %v after the kill although the cluster is paused\n%s", holder, ms(now.Sub(killed)), c.describe())
		}
		for _, m := range survivors {
			if ro, err := m.ReadOnly(); err != nil || !ro {
				t.Fatalf("%s: read_only=%v (err %v) %v after the kill, although the cluster is paused\n%s",
					m.Name, ro, err, ms(now.Sub(killed)), c.describe())
			}
			if st := m.Status(); st != nil && (st.HoldsLock || st.Role == "primary") {
				t.Fatalf("%s: /status %s %v after the kill, although the cluster is paused", m.Name, st, ms(now.Sub(killed)))
			}
		}
		if now.Sub(killed) >= 2*ttl && !expired.IsZero() && now.Sub(expired) >= ttl {
			break
		}
		if now.Sub(killed) > 2*ttl+10*time.Second {
			t.Fatalf("the dead leader's lock (etcd lease, ttl %v) still exists %v after the kill: holder %q", ttl, ms(now.Sub(killed)), holder)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("no failover for %v after the kill (%v after the lock expired)", ms(time.Since(killed)), ms(time.Since(expired)))
	for _, m := range survivors {
		if st := m.Status(); st == nil || st.Action != "idle" || !st.Paused {
			t.Errorf("%s: /status %s, want idle and paused", m.Name, st)
		}
	}

	resumed := time.Now()
	r = c.MustCtl("resume", "--wait", "--wait-timeout=60s")
	t.Logf("%s", r)
	if !strings.Contains(r.Stdout, "Resumed") || !strings.Contains(r.Stdout, "is the primary and accepts writes") {
		t.Errorf("agentctl resume --wait output lacks \"Resumed\" or the new primary:\n%s", r)
	}
	newPrimary := c.WaitHealthy(30*time.Second, old)
	if !strings.Contains(r.Stdout, newPrimary.Name+" is the primary") {
		t.Errorf("agentctl resume --wait named another primary than %s:\n%s", newPrimary.Name, r)
	}
	t.Logf("%s is the primary %v after the resume", newPrimary.Name, ms(time.Since(resumed)))
	if !newPrimary.HasRow("while-paused") {
		t.Errorf("the new primary %s lacks the row acknowledged while paused", newPrimary.Name)
	}
	c.WriteAndReplicate(newPrimary, "after-resume", old)
	if cs := c.CtlStatus(); cs.Paused || cs.Leader != newPrimary.Name {
		t.Errorf("agentctl status: paused=%v leader=%q, want resumed with leader %s", cs.Paused, cs.Leader, newPrimary.Name)
	}
	sb.Stop()
	sb.ExpectAlive()
	for _, e := range sb.Events() {
		if e.Writable && e.Member != old.Name && e.At.Before(resumed) {
			t.Errorf("%s was writable at %s, before the resume at %s", e.Member, stamp(e.At), stamp(resumed))
		}
	}
}
