package agent

import (
	"context"
	"testing"
	"time"
)

// runWatchdog runs db1's watchdog with a lock deadline 4 s ahead (its fence
// trigger, one retry_timeout of 1 s before it, is 3 s ahead) and returns
// the deadline.
func runWatchdog(t *testing.T, h *loopHarness) time.Time {
	t.Helper()
	a := h.agents["db1"]
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.watchdog(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := h.clock.Now().Add(4 * time.Second)
	a.setDeadline(deadline)
	waitUntil(t, h.clock.HasWaiters)
	return deadline
}

// stepWatchdogUntil advances the fake clock 10 ms at a time, each step once
// the watchdog has either armed its next timer or met cond, until cond
// holds or the clock reaches limit; it reports whether cond held.
func stepWatchdogUntil(t *testing.T, h *loopHarness, limit time.Time, cond func() bool) bool {
	t.Helper()
	for {
		waitUntil(t, func() bool { return cond() || h.clock.HasWaiters() })
		if cond() {
			return true
		}
		if !h.clock.Now().Before(limit) {
			return false
		}
		h.clock.Step(10 * time.Millisecond)
	}
}

// A watchdog fence that fails (a dropped connection, a lock wait timed
// out) is tried again, soon enough that mysqld is read-only by the
// deadline: one attempt and a log line would leave a leader writable past
// the moment another member may take over.
func TestWatchdogRetriesAFailedFence(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	a, db := h.agents["db1"], h.mysql.byName("db1")
	db.setFault(&db.fenceErr, errTimedOut)
	deadline, base := runWatchdog(t, h), db.fences()
	h.clock.Step(3 * time.Second)
	waitUntil(t, func() bool { return db.fences() == base+1 })
	db.setFault(&db.fenceErr, nil)
	if !stepWatchdogUntil(t, h, deadline, db.isReadOnly) {
		t.Fatalf("not read-only by the deadline after %d fence attempts", db.fences())
	}
	if a.hasDeadline() {
		t.Fatal("deadline not cleared after the retried fence held")
	}
	if n := db.fences() - base; n != 2 {
		t.Fatalf("%d fence attempts, want the failed one and one retry", n)
	}
}

// A fence that keeps failing is retried past the deadline (the leader may
// still be writable), but with a growing, capped backoff: no busy loop.
func TestWatchdogBacksOffWhileTheFenceFails(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	db := h.mysql.byName("db1")
	db.setFault(&db.fenceErr, errTimedOut)
	deadline, base := runWatchdog(t, h), db.fences()
	h.clock.Step(3 * time.Second)
	waitUntil(t, func() bool { return db.fences() == base+1 })
	stepWatchdogUntil(t, h, deadline, func() bool { return false })
	beforeDeadline := db.fences() - base
	stepWatchdogUntil(t, h, deadline.Add(10*time.Second), func() bool { return false })
	after := db.fences() - base - beforeDeadline
	// 1 s before the deadline, from 50 ms doubling: 5 retries; then at
	// most one a second.
	if beforeDeadline < 3 || beforeDeadline > 8 || after < 8 || after > 12 {
		t.Fatalf("%d attempts in the second before the deadline, %d in the 10 s after it: want a few, then about one a second",
			beforeDeadline, after)
	}
	if db.isReadOnly() {
		t.Fatal("read-only although every fence failed")
	}
}
