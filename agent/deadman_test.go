package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mysqlha/mysqlha/mysqlctl"
)

func TestDeadmanDelay(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		trigger time.Time
		want    time.Duration
		ok      bool
	}{
		{"no deadline", time.Time{}, 0, false},
		{"trigger passed", now.Add(-time.Second), 0, false},
		{"under a second away", now.Add(999 * time.Millisecond), 0, false},
		{"a second away", now.Add(time.Second), time.Second, true},
		{"3.25 s away", now.Add(3250 * time.Millisecond), 3250 * time.Millisecond, true},
	}
	for _, c := range cases {
		got, err := deadmanDelay(now, c.trigger)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("%s: deadmanDelay = %s, %v; want %s, ok %v", c.name, got, err, c.want, c.ok)
		}
	}
}

// A promotion arms the dead-man switch, to the fence trigger, before it
// unfences.
func TestDeadmanArmedBeforeUnfence(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	d := h.mysql.byName("db1")
	if d.deadmanArms != 1 {
		t.Fatalf("the promotion armed the dead-man switch %d times, want once", d.deadmanArms)
	}
	// ttl 5 s - safety_margin 1 s - retry_timeout 1 s, on a clock that did
	// not move since the lock was won.
	if want := 3 * time.Second; d.deadmanAfter != want {
		t.Fatalf("armed to fire in %s, want %s (the fence trigger)", d.deadmanAfter, want)
	}
}

// A server on which the dead-man switch cannot be armed (no event
// scheduler, a missing privilege) is never made writable: nothing would
// fence it if its agent died. Once arming works, the promotion completes.
func TestDeadmanArmFailureKeepsReadOnly(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	d := h.mysql.byName("db1")
	d.deadmanErr = mysqlctl.ErrNoEventScheduler
	for range 3 {
		h.advance(time.Second, h.names...)
	}
	if h.holder() != "db1" {
		t.Fatalf("holder %q, want db1 (the promotion keeps the lock and retries)", h.holder())
	}
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("writable %v although the dead-man switch could not be armed", w)
	}
	if got := testutil.ToFloat64(h.agents["db1"].metrics.DeadmanFailures); got < 1 {
		t.Fatalf("deadman_failures_total = %v, want > 0", got)
	}
	d.c.mu.Lock()
	d.deadmanErr = nil
	d.c.mu.Unlock()
	h.advance(time.Second, h.names...)
	h.expectPrimary("db1")
}

// Every move of the deadline pushes the dead-man switch back, off the loop,
// once this process armed it; a failed push is counted.
func TestDeadmanPushedBackOnRenewal(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	a, d := h.agents["db1"], h.mysql.byName("db1")
	select {
	case <-a.pushDeadman: // the promotion's own deadline moves, already armed
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.deadmanPusher(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	arms := func() int {
		d.c.mu.Lock()
		defer d.c.mu.Unlock()
		return d.deadmanArms
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal(what)
			}
		}
	}
	h.clock.Step(time.Second)
	a.renew(h.ctx)
	waitFor("a renewal did not push the dead-man switch back", func() bool { return arms() == 2 })

	d.c.mu.Lock()
	d.deadmanErr = errors.New("ALTER EVENT: access denied")
	d.c.mu.Unlock()
	h.clock.Step(time.Second)
	a.renew(h.ctx)
	waitFor("a failed push was not counted", func() bool { return testutil.ToFloat64(a.metrics.DeadmanFailures) == 1 })

	// Cleared deadline (fenced): nothing to push back any more.
	a.fenceSelf(h.ctx, fenceKindSelf, "test")
	d.c.mu.Lock()
	d.deadmanErr = nil
	d.c.mu.Unlock()
	a.setDeadline(h.clock.Now().Add(time.Minute))
	time.Sleep(50 * time.Millisecond)
	if n := arms(); n != 2 {
		t.Fatalf("pushed back %d times in all, want 2: a process that fenced since it armed the switch pushes nothing", n)
	}
}
