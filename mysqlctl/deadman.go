package mysqlctl

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ALTER EVENT of an event that is not there, or in a schema that is not.
const (
	erEventDoesNotExist = 1539
	erBadDB             = 1049
)

// ErrNoEventScheduler: the server does not run events (event_scheduler is
// DISABLED, or OFF and the agent may not switch it on), so the dead-man
// switch cannot be armed.
var ErrNoEventScheduler = errors.New("mysqlctl: event scheduler not running")

// MinDeadmanDelay is the shortest delay ArmDeadman accepts: the server
// schedules whole seconds, and MySQL disables, without running it, a
// one-time event whose time has already passed.
const MinDeadmanDelay = time.Second

// ArmDeadman arms the dead-man switch: an event inside the server that
// fences it after the given delay, measured on the server's own clock, and
// that holds whether or not the agent still runs. Calling it again pushes
// the event back; an agent that stops calling it leaves a server that makes
// itself read-only. It runs, on one connection:
//
//	SELECT @@global.event_scheduler
//	SET GLOBAL event_scheduler = ON                    -- only if OFF
//	SET SESSION sql_log_bin = 0, time_zone = '+00:00'
//	ALTER EVENT mysqlha.deadman ON SCHEDULE AT CURRENT_TIMESTAMP(6) + INTERVAL us MICROSECOND ON COMPLETION PRESERVE ENABLE
//	-- only when the event does not exist yet (a new server, or a rebuilt one):
//	CREATE DATABASE IF NOT EXISTS mysqlha
//	MySQL:   CREATE EVENT IF NOT EXISTS mysqlha.deadman ON SCHEDULE AT ... DO SET GLOBAL super_read_only = ON
//	MariaDB: CREATE EVENT IF NOT EXISTS mysqlha.deadman ON SCHEDULE AT ... DO SET GLOBAL read_only = ON
//	SET SESSION sql_log_bin = 1, time_zone = DEFAULT
//
// The event runs as the agent's user (its definer), which needs EVENT and
// CREATE on the mysqlha schema besides what fencing needs. Nothing reaches
// the binary log: not the schema, not the event, not the event's run. The
// server stores the time in whole seconds, dropping the fraction, so the
// event fires up to a second before the delay, never after it (plus the
// time the statement took to reach the server).
//
// ArmDeadman fails with ErrNoEventScheduler when the server runs no events
// (then nothing fences it if the agent dies: the caller must not make it
// writable), with ErrInvalidConfig for a delay under MinDeadmanDelay, and
// as the other operations do when the server or a privilege is missing.
// After a failure the event, if any, keeps the time it had.
func (i *Instance) ArmDeadman(ctx context.Context, after time.Duration) error {
	if after < MinDeadmanDelay {
		return fmt.Errorf("%w: dead-man delay %s is under %s", ErrInvalidConfig, after, MinDeadmanDelay)
	}
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return i.wrap("arming the dead-man switch: getting a connection", err)
	}
	defer conn.Close()
	var scheduler string
	s := i.dialect.EventScheduler()
	if err := conn.QueryRowContext(ctx, s.SQL, s.Args...).Scan(&scheduler); err != nil {
		return i.wrap("arming the dead-man switch: reading event_scheduler", err)
	}
	switch strings.ToUpper(scheduler) {
	case "ON", "1":
	case "OFF", "0":
		if err := execOn(ctx, conn, i.dialect.EnableEventScheduler()); err != nil {
			return fmt.Errorf("arming the dead-man switch on %s: event_scheduler is OFF and switching it on failed "+
				"(set event_scheduler = ON in the server's configuration): %w: %w", i.cfg.Addr, ErrNoEventScheduler, classify(err))
		}
	default:
		return fmt.Errorf("arming the dead-man switch on %s: event_scheduler is %s (set event_scheduler = ON in the "+
			"server's configuration and restart it): %w", i.cfg.Addr, scheduler, ErrNoEventScheduler)
	}

	if err := execOn(ctx, conn, i.dialect.DeadmanSession()); err != nil {
		return i.wrap("arming the dead-man switch: keeping it out of the binary log", err)
	}
	// From here the session must not return to the pool as it is: restored,
	// or discarded.
	restored := false
	defer func() {
		if !restored {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	err = execOn(ctx, conn, i.dialect.ExtendDeadman(after))
	if isErrno(err, erEventDoesNotExist) || isErrno(err, erBadDB) {
		err = execOn(ctx, conn, i.dialect.CreateDeadmanSchema(), i.dialect.CreateDeadman(after))
	}
	if err != nil {
		return i.wrap(fmt.Sprintf("arming the dead-man switch (read-only in %s)", after), err)
	}
	restored = execOn(ctx, conn, i.dialect.RestoreSession()) == nil
	return nil
}
