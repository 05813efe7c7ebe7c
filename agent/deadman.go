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
// The delay sent is measured on our clock up to the trigger, and the
// server adds it to its own clock: no two clocks are compared. The call is
// bounded by retry_timeout, the gap between the trigger and the deadline,
// so the event fires by the deadline however long the statement took to
// reach the server; the server's whole seconds make it fire up to a second
// earlier. A primary whose agent lives renews every loop_wait, at least a
// retry_timeout before the trigger (the timing rule), and pushes the event
// back each time.

var errNoDeadline = errors.New("no lock deadline")

// deadmanDelay is how long from now the dead-man event must wait: until the
// fence trigger of deadline. It fails when the deadline is zero (we may not
// write) or the trigger is too close for the server to schedule.
func deadmanDelay(now, trigger time.Time) (time.Duration, error) {
	if trigger.IsZero() {
		return 0, errNoDeadline
	}
	after := trigger.Sub(now)
	if after < mysqlctl.MinDeadmanDelay {
		return after, fmt.Errorf("the fence trigger is %s away, under the %s the server can schedule", after, mysqlctl.MinDeadmanDelay)
	}
	return after, nil
}

// armDeadman arms, or pushes back, the dead-man switch on db to the fence
// trigger of the current deadline, within retry_timeout. Every failure is
// counted (deadman_failures_total).
func (a *Agent) armDeadman(ctx context.Context, db Database) error {
	after, err := deadmanDelay(a.clock.Now(), a.effectiveDeadline())
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, a.config().RetryTimeout)
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
