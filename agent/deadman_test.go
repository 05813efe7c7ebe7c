package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mysqlha/mysqlha/mysqlctl"
)

func TestDeadmanSchedule(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	// The defaults: renewed at now, ttl 5 s, safety_margin 1 s,
	// retry_timeout 1 s: trigger at +3 s, the lock could be taken at +5 s.
	trigger, lockEnd := now.Add(3*time.Second), now.Add(5*time.Second)
	cases := []struct {
		name             string
		now              time.Time
		trigger, lockEnd time.Time
		after, bound     time.Duration
		ok               bool
	}{
		{"no deadline", now, time.Time{}, time.Time{}, 0, 0, false},
		{"the defaults: aimed at the deadline, fired by a quarter of the room before the lock's end", now, trigger, lockEnd,
			4 * time.Second, 500 * time.Millisecond, true},
		{"no safety margin: still before the lock's end", now, trigger, now.Add(4 * time.Second),
			3500 * time.Millisecond, 250 * time.Millisecond, true},
		{"aim under a second away", now.Add(3100 * time.Millisecond), trigger, lockEnd, 900 * time.Millisecond, 500 * time.Millisecond, false},
		{"aim passed", now.Add(5 * time.Second), trigger, lockEnd, -time.Second, 500 * time.Millisecond, false},
	}
	for _, c := range cases {
		after, bound, err := deadmanSchedule(c.now, c.trigger, c.lockEnd)
		if (err == nil) != c.ok || (c.ok && (after != c.after || bound != c.bound)) {
			t.Errorf("%s: deadmanSchedule = %s, %s, %v; want %s, %s, ok %v", c.name, after, bound, err, c.after, c.bound, c.ok)
			continue
		}
		// However late the push lands, the event fires before the lock
		// could be taken, and, truncated to whole seconds, not before the
		// fence trigger less a second.
		if c.ok {
			if latest := c.now.Add(c.after + bound); !latest.Before(c.lockEnd) {
				t.Errorf("%s: may fire at %s, not before the lock's end %s", c.name, latest.Sub(now), c.lockEnd.Sub(now))
			}
			if earliest := c.now.Add(c.after - time.Second); earliest.Before(c.trigger.Add(-time.Second)) {
				t.Errorf("%s: may fire at %s, over a second before the trigger", c.name, earliest.Sub(now))
			}
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
	// Aimed midway between the fence trigger (ttl 5 s - safety_margin 1 s
	// - retry_timeout 1 s) and the lock's end (ttl), on a clock that did
	// not move since the lock was won.
	if want := 4 * time.Second; d.deadmanAfter != want {
		t.Fatalf("armed to fire in %s, want %s", d.deadmanAfter, want)
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
