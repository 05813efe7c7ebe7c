package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// The lock deadline is start of the last successful renewal + ttl -
// safety_margin; zero means we may not write. Fencing is triggered one
// retry_timeout before it, since the fence itself may take that long and
// must be complete by the deadline.

func (a *Agent) currentDeadline() time.Time {
	a.deadlineMu.Lock()
	defer a.deadlineMu.Unlock()
	return a.deadline
}

func (a *Agent) hasDeadline() bool { return !a.currentDeadline().IsZero() }

func (a *Agent) fenceTrigger(deadline time.Time) time.Time {
	return deadline.Add(-a.config().RetryTimeout)
}

// effectiveDeadline is the fence trigger, or zero: what decisions compare with.
func (a *Agent) effectiveDeadline() time.Time {
	if d := a.currentDeadline(); !d.IsZero() {
		return a.fenceTrigger(d)
	}
	return time.Time{}
}

func (a *Agent) pastDeadline() bool {
	d := a.currentDeadline()
	return !d.IsZero() && !a.clock.Now().Before(a.fenceTrigger(d))
}

// canWriteFor reports whether the deadline leaves at least d, so a write that
// takes up to d still ends before it.
func (a *Agent) canWriteFor(d time.Duration) bool {
	dl := a.currentDeadline()
	return !dl.IsZero() && a.clock.Now().Add(d).Before(a.fenceTrigger(dl))
}

func (a *Agent) setDeadline(d time.Time) {
	a.deadlineMu.Lock()
	a.deadline = d
	a.deadlineMu.Unlock()
	if d.IsZero() {
		a.deadmanArmed.Store(false)
	}
	for _, wake := range []chan struct{}{a.rearm, a.pushDeadman} {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// Backoff between the watchdog's fence attempts: short at first, so a
// fence that fails fast (a dropped connection, a refused login) is retried
// within the retry_timeout left before the deadline; doubling to a cap, so a
// mysqld that keeps failing is not hammered.
const (
	watchdogRetryMin = 50 * time.Millisecond
	watchdogRetryMax = time.Second
)

// watchdog fences mysqld when the deadline passes, even while the loop is
// stuck in a slow call. It uses its own connection, so a loop holding every
// pooled connection cannot block it. A failed fence is retried with
// backoff until one holds or the deadline is renewed or cleared, also past
// the deadline: a leader that may still be writable never stops trying.
func (a *Agent) watchdog(ctx context.Context) {
	var timer clock.Timer
	var fire <-chan time.Time
	arm := func(d time.Duration) {
		timer = a.clock.NewTimer(d)
		fire = timer.C()
	}
	var retry time.Duration // the backoff after the last failed fence; 0 when none failed
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-a.rearm:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
			fire = nil
		}
		deadline := a.currentDeadline()
		if deadline.IsZero() {
			retry = 0
			continue
		}
		if wait := a.fenceTrigger(deadline).Sub(a.clock.Now()); wait > 0 {
			retry = 0
			arm(wait)
			continue
		}
		if retry == 0 {
			a.metrics.fenced(fenceKindSelfDeadline)
			a.log.Warn("lock deadline passed without a renewal: fencing mysqld")
		}
		err := a.watchdogFence(ctx)
		if err == nil || ctx.Err() != nil {
			retry = 0
			continue
		}
		retry = min(max(2*retry, watchdogRetryMin), watchdogRetryMax)
		a.log.Error("watchdog fence failed; retrying", zap.Duration("retry_in", retry),
			zap.Duration("past_deadline", max(0, a.clock.Since(deadline))), zap.Error(err))
		arm(retry)
	}
}

// watchdogFence fences the local mysqld once, then clears the deadline.
func (a *Agent) watchdogFence(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, a.config().RetryTimeout)
	defer cancel()
	db, err := a.dial(cctx, a.local)
	if err != nil {
		return fmt.Errorf("connecting to the local mysqld to fence it: %w", err)
	}
	defer closeDB(db)
	// The fence shares the dial's bound, so it ends by the deadline; the
	// kill of idle sessions that follows may take a retry_timeout of its own.
	if err := db.Fence(cctx); err != nil {
		return fmt.Errorf("fencing the local mysqld: %w", err)
	}
	kctx, kcancel := context.WithTimeout(ctx, a.config().RetryTimeout)
	defer kcancel()
	if _, err := db.KillClients(kctx); err != nil {
		a.log.Warn("watchdog could not kill client sessions", zap.Error(err))
	}
	// Only now may the deadline be cleared: mysqld is read-only.
	a.deadlineMu.Lock()
	if !a.deadline.IsZero() && !a.clock.Now().Before(a.fenceTrigger(a.deadline)) {
		a.deadline = time.Time{}
	}
	a.deadlineMu.Unlock()
	return nil
}
