package agent

import (
	"context"
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

// watchdog fences mysqld when the deadline passes, even while the loop is
// stuck in a slow call. It uses its own connection, so a loop holding every
// pooled connection cannot block it.
func (a *Agent) watchdog(ctx context.Context) {
	var timer clock.Timer
	var fire <-chan time.Time
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
			continue
		}
		if wait := a.fenceTrigger(deadline).Sub(a.clock.Now()); wait > 0 {
			timer = a.clock.NewTimer(wait)
			fire = timer.C()
			continue
		}
		a.watchdogFence(ctx)
	}
}

func (a *Agent) watchdogFence(ctx context.Context) {
	a.metrics.fenced(fenceKindSelfDeadline)
	a.log.Warn("lock deadline passed without a renewal: fencing mysqld")
	cctx, cancel := context.WithTimeout(ctx, a.config().RetryTimeout)
	defer cancel()
	db, err := a.dial(cctx, a.local)
	if err != nil {
		a.log.Error("watchdog cannot reach mysqld to fence it", zap.Error(err))
		return
	}
	defer closeDB(db)
	// The fence shares the dial's bound, so it ends by the deadline; the
	// kill of idle sessions that follows may take a retry_timeout of its own.
	if err := db.Fence(cctx); err != nil {
		a.log.Error("watchdog fence failed", zap.Error(err))
		return
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
}
