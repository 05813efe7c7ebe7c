package agent

import (
	"testing"
	"time"
)

// hangUntilTakeover hangs the primary db1's mysqld and steps every agent a
// loop_wait at a time until another member holds the lock; it returns how
// long that took, or fails after limit.
func hangUntilTakeover(h *loopHarness, limit time.Duration) time.Duration {
	h.t.Helper()
	h.mysql.byName("db1").hung = true
	start := h.clock.Now()
	for h.holder() == "db1" || h.holder() == "" || len(h.mysql.writable()) == 0 {
		if h.clock.Since(start) > limit {
			h.t.Fatalf("no other member took over within %s of db1's mysqld hanging (holder %q, writable %v)",
				limit, h.holder(), h.mysql.writable())
		}
		h.advance(time.Second, h.names...)
	}
	return h.clock.Since(start)
}

// The primary's mysqld hangs; its agent, which can see the process, kills
// it after ttl and releases the lock: the outage is bounded, and the hung
// server can never resume writable next to the new primary.
func TestLoopHungPrimaryIsKilledAndReplaced(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.canKill = true
	h.startAgent("db1")
	h.bootstrap()
	ttl := h.config.TTL
	took := hangUntilTakeover(h, 3*ttl)
	if h.mysql.byName("db1").up {
		t.Fatal("the hung mysqld was not killed")
	}
	if bound := ttl + 4*h.config.LoopWait; took > bound {
		t.Errorf("took %s, over the bound %s", took, bound)
	}
	if !h.hasEvent("db1", "KilledHungMySQL") {
		t.Error("no KilledHungMySQL event")
	}
}

// Without its process in view, an asynchronous cluster's holder keeps the
// lock through the hang: a resumed server would take writes next to a new
// primary, and nothing could stop it.
func TestLoopHungPrimaryKeepsTheLockWhenItCannotKill(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db1").hung = true
	h.advance(4*h.config.TTL, h.names...)
	if h.holder() != "db1" || len(h.mysql.writable()) != 0 {
		t.Fatalf("holder %q, writable %v: want db1 to keep the lock and nobody writable", h.holder(), h.mysql.writable())
	}
	h.mysql.byName("db1").hung = false
	h.advance(2*time.Second, h.names...)
	h.expectPrimary("db1")
}

// In lossless mode a holder that cannot kill its hung mysqld gives the lock
// up anyway: the new primary stops every receiver before it unfences, so
// the resumed server collects no acknowledgement, and its agent fences it.
func TestLoopLosslessHungPrimaryReleasesUnfenced(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	hangUntilTakeover(h, 3*h.config.TTL)
	newPrimary := h.holder()
	for _, n := range []string{"db2", "db3"} {
		if d := h.mysql.byName(n); n != newPrimary && d.ioRunning && d.source == h.mysql.byName("db1").addr {
			t.Fatalf("%s still pulls from the hung old primary", n)
		}
	}
	h.mysql.byName("db1").hung = false
	h.advance(3*time.Second, h.names...)
	h.expectPrimary(newPrimary)
	h.expectReplicaOf("db1", newPrimary)
}
