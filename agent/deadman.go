package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/mysqlctl"
)

// The dead-man switch is the fence that holds without this process: an
// event inside our mysqld (mysqlctl.Instance.ArmDeadman) that makes it
// read-only at the instant the watchdog would fence it, the fence trigger
// of our lock deadline. A promotion arms it before it unfences, and refuses
// to unfence when it cannot (a server that runs no events, a missing
// privilege): nothing else would fence a writable server whose agent died.
// Every later move of the deadline (a renewal, a failsafe confirmation)
// pushes it back, from the deadmanPusher goroutine, off the loop. A push
// that fails is logged as an error and counted, never retried blindly:
// the event then fires at the previous trigger, which is still before the
// deadline, so a failed push costs availability, never safety.
//
// The event must fire before another member could take the lock: the
// last renewal's start + ttl (the deadline + safety_margin; others count ttl
// from when they saw that renewal, later still). The room between our own
// fence trigger and that instant is retry_timeout + safety_margin. The
// event is aimed at the middle of it, and the push is bounded by a quarter
// of it, so however long the statement takes to reach the server the event
// fires a quarter of the room before the lock could be taken; the server's
// whole seconds make it fire up to a second earlier, with the defaults no
// earlier than our own trigger. The delay sent is measured on our clock
// and the server adds it to its own: no two clocks are compared. A primary
// whose agent lives renews every loop_wait and pushes the event back each
// time; a failsafe confirmation arrives before its trigger and does too.

var errNoDeadline = errors.New("no lock deadline")

// deadmanSchedule is how long from now the dead-man event must wait, and
// how long the push may take, for the fence trigger and the lock's end
// (see above). It fails when there is no deadline (we may not write) or the
// aim is too close for the server to schedule.
func deadmanSchedule(now, trigger, lockEnd time.Time) (after, bound time.Duration, err error) {
	if trigger.IsZero() {
		return 0, 0, errNoDeadline
	}
	room := lockEnd.Sub(trigger)
	bound = room / 4
	after = trigger.Add(room / 2).Sub(now)
	if after < mysqlctl.MinDeadmanDelay {
		return after, bound, fmt.Errorf("the dead-man aim is %s away, under the %s the server can schedule", after, mysqlctl.MinDeadmanDelay)
	}
	return after, bound, nil
}

// armDeadman arms, or pushes back, the dead-man switch on db (see
// deadmanSchedule). Every failure is counted (deadman_failures_total).
func (a *Agent) armDeadman(ctx context.Context, db Database) error {
	var trigger, lockEnd time.Time
	if d := a.currentDeadline(); !d.IsZero() {
		trigger, lockEnd = a.fenceTrigger(d), d.Add(a.config().SafetyMargin)
	}
	after, bound, err := deadmanSchedule(a.clock.Now(), trigger, lockEnd)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, bound)
		err = db.ArmDeadman(cctx, after)
		cancel()
	}
	if err != nil {
		a.metrics.DeadmanFailures.Inc()
		return fmt.Errorf("arming the dead-man switch to fire in %s: %w", after.Round(time.Millisecond), err)
	}
	return nil
}

// deadmanPusher pushes the dead-man switch back whenever the deadline
// moves (setDeadline wakes it), while this process armed it. It keeps a
// connection of its own, so a loop busy on the pool never delays a push.
func (a *Agent) deadmanPusher(ctx context.Context) {
	var db Database
	defer func() {
		if db != nil {
			closeDB(db)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.pushDeadman:
		}
		if !a.deadmanArmed.Load() || !a.hasDeadline() {
			continue
		}
		if db == nil {
			cctx, cancel := context.WithTimeout(ctx, a.config().RetryTimeout)
			conn, err := a.dial(cctx, a.local)
			cancel()
			if err != nil {
				a.metrics.DeadmanFailures.Inc()
				a.log.Error("cannot reach mysqld to push the dead-man switch back: it fences mysqld at the previous deadline", zap.Error(err))
				continue
			}
			db = conn
		}
		if err := a.armDeadman(ctx, db); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Error("pushing the dead-man switch back failed: it fences mysqld at the previous deadline", zap.Error(err))
			closeDB(db)
			db = nil
		}
	}
}
