package mysqlctl

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// fenceGrace lets an uncontended fence finish without disturbing anyone
	// before Fence starts killing; fenceKillInterval is how often it kills
	// again, for sessions that arrived since.
	fenceGrace        = 100 * time.Millisecond
	fenceKillInterval = 150 * time.Millisecond
	// fenceLockWaitSeconds bounds each attempt of the SET server-side, so an
	// attempt cut off by the caller's deadline stops waiting within a second.
	// It is MySQL's minimum, and well under the driver's read timeout.
	fenceLockWaitSeconds = 1
	// killParallelism is how many KILL statements are in flight at once: the
	// pool holds four connections and a fence keeps one of them.
	killParallelism = 3
)

// Fence makes the server refuse writes from every client but replication,
// and returns nil only once it has read back that it does. It runs, on a
// connection of its own (discarded afterwards unless the server was already
// fenced, so that neither its session setting nor an attempt still running
// server-side returns to the pool):
//
//	MySQL:   SELECT @@global.read_only, @@global.super_read_only   -- both 1: already fenced, done
//	MariaDB: SELECT @@global.read_only                             -- 1: already fenced, done
//	SET SESSION lock_wait_timeout = 1
//	MySQL:   SET GLOBAL super_read_only = ON                       -- again after each lock-wait timeout
//	MariaDB: SET GLOBAL read_only = ON
//	the same SELECT again, to verify
//
// Turning read-only on takes the global read lock, so the SET waits for every
// statement that is writing (a long UPDATE, or one queued behind another
// transaction's row locks), for every LOCK TABLES ... WRITE and for every
// commit in progress. A fence that waits on a client is no fence: if the SET
// has not returned after a grace of 100 ms (or a tenth of the time left, if
// less), Fence kills the client sessions from other connections, exactly as
// KillClients does, and kills again every 150 ms, since new sessions keep
// arriving, until the SET returns. A killed statement or transaction rolls
// back: it never committed. An idle open transaction does not block the SET;
// once read-only holds, that transaction can no longer commit (error 1290)
// but keeps its row locks until its session ends, which is why a caller
// demoting a primary follows Fence with KillClients.
//
// A commit parked in the semi-sync wait for a replica's acknowledgement holds
// the commit lock as well. MariaDB ends that wait when the session is killed;
// MySQL does not (only an acknowledgement or rpl_semi_sync_source_timeout
// does). So from the second kill round on, Fence also runs
//
//	MySQL:   SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_wait_sessions'
//	MariaDB: SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'
//
// and, only if commits are still waiting, switches source semi-sync off,
// which releases them:
//
//	MySQL:   SET GLOBAL rpl_semi_sync_source_enabled = OFF
//	MariaDB: SET GLOBAL rpl_semi_sync_master_enabled = OFF
//
// Those transactions are already in the binary log and now commit on this
// server alone. Their sessions were killed a round earlier, which closed
// their clients' connections, so no client is told they succeeded (the
// users KillClients spares, the agent's and replication's, write nothing);
// when the server rejoins they are errant transactions, like those a crash
// at that moment leaves. A fenced server is no semi-sync source, so the
// switch stays off. This path is verified against MariaDB with a waiter KILL
// cannot reach, and against MySQL at the statement level only.
//
// Fence fails with ErrTimeout when ctx's deadline passes first (together
// with ErrUnreachable when the server answered nothing at all: a hung
// server), with ErrUnreachable or ErrDown when the server is gone, and with
// ErrPrivilege when the user may not set the switch. Killing cannot cure two
// blockers, which therefore make it time out: replication threads, which it
// never kills, and a killed transaction whose rollback outlasts the deadline.
// An attempt cut off by the deadline stops waiting server-side within a
// second and may still take effect in that second.
func (i *Instance) Fence(ctx context.Context) error {
	run := &fenceRun{i: i, start: time.Now()}
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return run.fail(ctx, "getting a connection", err)
	}
	defer conn.Close()
	fenced, err := i.fenced(ctx, conn)
	if err != nil {
		return run.fail(ctx, "reading "+i.fenceSwitch(), err)
	}
	if fenced {
		return nil
	}
	run.answered = true
	// Runs before conn.Close: the session's lock_wait_timeout, or an attempt
	// the deadline cut off, must not reach the next user of the pool.
	defer conn.Raw(func(any) error { return driver.ErrBadConn })

	if _, err := conn.ExecContext(ctx, i.dialect.SessionLockWaitTimeout(fenceLockWaitSeconds).SQL); err != nil {
		return run.fail(ctx, "setting lock_wait_timeout", err)
	}
	done := make(chan error, 1)
	go func() { done <- i.setReadOnly(ctx, conn) }()
	grace := fenceGrace
	if deadline, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(deadline)/10)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return run.fail(ctx, "setting "+i.fenceSwitch()+" = ON", err)
			}
			fenced, err := i.fenced(ctx, conn)
			if err != nil {
				return run.fail(ctx, "verifying "+i.fenceSwitch(), err)
			}
			if !fenced {
				return fmt.Errorf("fencing on %s: %s = ON succeeded but reads OFF again: someone turned it off",
					i.cfg.Addr, i.fenceSwitch())
			}
			return nil
		case <-timer.C:
			// The SET returns (to done) when ctx ends, so this loop needs no
			// case of its own for it, and never leaves the goroutine behind.
			run.unblock(ctx)
			timer.Reset(fenceKillInterval)
		}
	}
}

// fenceRun is what one Fence call did, for its error message.
type fenceRun struct {
	i     *Instance
	start time.Time
	// answered: the server answered at least one statement of this fence.
	answered bool
	rounds   int
	killed   int
	// sideErr is the last failure to kill or to release semi-sync waits.
	sideErr error
}

// unblock ends what keeps the SET waiting: from the second round on it
// releases the commits still in the semi-sync wait, whose sessions an
// earlier round killed, then it kills the client sessions.
func (r *fenceRun) unblock(ctx context.Context) {
	if r.rounds > 0 {
		if err := r.i.releaseSemiSyncWaits(ctx); err != nil && ctx.Err() == nil {
			r.sideErr = err
		}
	}
	r.rounds++
	n, err := r.i.KillClients(ctx)
	r.killed += n
	if err != nil && ctx.Err() == nil {
		r.sideErr = err
	}
}

// fail says what Fence was doing when err happened. A deadline that passed
// is ErrTimeout; if the server answered nothing before it, the server is
// also ErrUnreachable (hung), otherwise it answered and only the fence did
// not finish in time.
func (r *fenceRun) fail(ctx context.Context, doing string, err error) error {
	if r.killed > 0 {
		doing += fmt.Sprintf(" (%d client sessions killed)", r.killed)
	}
	var out error
	switch {
	case !errors.Is(ctx.Err(), context.DeadlineExceeded):
		out = fmt.Errorf("fencing on %s: %s: %w", r.i.cfg.Addr, doing, classify(err))
	case r.answered:
		out = fmt.Errorf("fencing on %s: %s, gave up after %s: %w: %w", r.i.cfg.Addr, doing,
			time.Since(r.start).Round(time.Millisecond), ErrTimeout, err)
	default:
		out = fmt.Errorf("fencing on %s: %s, gave up after %s: %w: %w", r.i.cfg.Addr, doing,
			time.Since(r.start).Round(time.Millisecond), ErrTimeout, classify(err))
	}
	if r.sideErr != nil {
		out = fmt.Errorf("%w; and %w", out, r.sideErr)
	}
	return out
}

func (i *Instance) fenceSwitch() string {
	if i.dialect.mariaDB() {
		return "read_only"
	}
	return "super_read_only"
}

// fenced runs Dialect.FenceState on conn: fenced when every switch reads 1.
func (i *Instance) fenced(ctx context.Context, conn *sql.Conn) (bool, error) {
	s := i.dialect.FenceState()
	rows, err := conn.QueryContext(ctx, s.SQL, s.Args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return false, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return false, err
		}
		return false, fmt.Errorf("%s returned no row", s.SQL)
	}
	values := make([]sql.NullInt64, len(cols))
	ptrs := make([]any, len(cols))
	for k := range values {
		ptrs[k] = &values[k]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return false, err
	}
	for _, v := range values {
		if !v.Valid || v.Int64 != 1 {
			return false, nil
		}
	}
	return true, rows.Close()
}

// setReadOnly runs the fence statements on conn, again after each lock-wait
// timeout, until they succeed, fail otherwise, or ctx ends.
func (i *Instance) setReadOnly(ctx context.Context, conn *sql.Conn) error {
	for {
		err := execOn(ctx, conn, i.dialect.Fence()...)
		if !isErrno(err, erLockWaitTimeout) || ctx.Err() != nil {
			return err
		}
	}
}

func execOn(ctx context.Context, conn *sql.Conn, stmts ...Statement) error {
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s.SQL, s.Args...); err != nil {
			return err
		}
	}
	return nil
}

// releaseSemiSyncWaits switches source semi-sync off when commits are
// waiting for an acknowledgement (see Fence).
func (i *Instance) releaseSemiSyncWaits(ctx context.Context) error {
	status, err := i.keyValues(ctx, i.dialect.SemiSyncWaitSessions())
	if err != nil {
		return i.wrap("reading semi-sync waits", err)
	}
	for _, v := range status {
		if n, _ := strconv.Atoi(strings.TrimSpace(v)); n > 0 {
			return i.exec(ctx, "releasing commits waiting for semi-sync acknowledgement", i.dialect.DisableSemiSyncSource())
		}
	}
	return nil
}

// KillClients ends every client session, sparing system threads, replication
// threads, the agent's own user and the replication users, and returns how
// many it killed:
//
//	SELECT ID, USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()
//	MySQL:   KILL CONNECTION id
//	MariaDB: KILL HARD CONNECTION id
//
// Sessions running a statement die first, idle ones after: an idle session
// may hold row locks a running statement waits for, and killing it first
// would let that statement commit. Within each group up to three KILLs run at
// once. A session that ended by itself in between, or is already being
// killed, is not an error; any other failure does not stop the others, and
// the first is returned.
func (i *Instance) KillClients(ctx context.Context) (int, error) {
	conns, err := i.Connections(ctx)
	if err != nil {
		return 0, err
	}
	var running, idle []uint64
	for _, c := range ClientConnections(conns, append([]string{i.cfg.User}, i.cfg.ReplicationUsers...)...) {
		if strings.EqualFold(c.Command, "Sleep") {
			idle = append(idle, c.ID)
		} else {
			running = append(running, c.ID)
		}
	}
	killed, err := i.kill(ctx, running)
	n, idleErr := i.kill(ctx, idle)
	return killed + n, cmp.Or(err, idleErr)
}

// kill ends the given sessions, killParallelism at a time.
func (i *Instance) kill(ctx context.Context, ids []uint64) (int, error) {
	var (
		mu       sync.Mutex
		killed   int
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan uint64)
	for range min(len(ids), killParallelism) {
		wg.Go(func() {
			for id := range next {
				err := i.exec(ctx, fmt.Sprintf("killing client connection %d", id), i.dialect.KillConnection(id))
				mu.Lock()
				switch {
				case err == nil:
					killed++
				case isNoSuchThread(err):
				case firstErr == nil:
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	return killed, firstErr
}
