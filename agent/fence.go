package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
)

// fenceSelf makes the local mysqld refuse writes, then gives up our right to
// write. It stops at the first step that fails and returns why; without a
// connection to the local mysqld, step 1 fails.
//
// 1. Fence, within retry_timeout (mysqlctl.Instance.Fence): read the switch;
// if it is off, set it, and read it back. While the SET waits for the global
// read lock, the client sessions in its way are killed (as in step 2) every
// 150 ms until it returns:
//
//	MySQL:   SELECT @@global.read_only, @@global.super_read_only
//	         SET SESSION lock_wait_timeout = 1
//	         SET GLOBAL super_read_only = ON
//	         SELECT @@global.read_only, @@global.super_read_only
//	MariaDB: SELECT @@global.read_only
//	         SET SESSION lock_wait_timeout = 1
//	         SET GLOBAL read_only = ON
//	         SELECT @@global.read_only
//
// From the second kill round on, commits still waiting for a semi-sync
// acknowledgement (which a KILL does not release on MySQL) are released:
//
//	MySQL:   SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_wait_sessions'
//	         SET GLOBAL rpl_semi_sync_source_enabled = OFF   -- only if > 0
//	MariaDB: SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'
//	         SET GLOBAL rpl_semi_sync_master_enabled = OFF   -- only if > 0
//
// 2. Kill every remaining client session (an idle open transaction survives
// the fence and keeps its row locks), within a retry_timeout of its own; a
// failure here is logged, not returned:
//
//	SELECT ID, USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()
//	MySQL:   KILL CONNECTION id        -- each client session
//	MariaDB: KILL HARD CONNECTION id
//
// 3. Clear the lock deadline, only now that the fence holds, so the watchdog
// stands down.
//
// 4. If we were leading or primary, log it and record a Fenced Event; drop
// our pod's role label (dcs.RoleUnknown).
func (a *Agent) fenceSelf(ctx context.Context, kind fenceKind, reason string) error {
	a.metrics.fenced(kind)
	a.metrics.IsLeader.Set(0)
	if a.db == nil {
		a.log.Error("cannot fence: local mysqld not connected", zap.String("reason", reason))
		return fmt.Errorf("local mysqld not connected: %w", a.dialErr)
	}
	if err := a.fenceAndKill(ctx, a.db); err != nil {
		a.log.Error("fencing local mysqld failed", zap.String("reason", reason), zap.Error(err))
		return err
	}
	wasLeading := a.hasDeadline()
	a.setDeadline(time.Time{})
	if wasLeading || a.role == dcs.RolePrimary {
		a.log.Warn("fenced local mysqld", zap.String("reason", reason))
		a.labeler.Event(ctx, a.self.Name, eventWarning, "Fenced", reason)
	}
	a.setRole(ctx, dcs.RoleUnknown)
	return nil
}

// fenceAndKill fences db, then kills its remaining client sessions (an idle
// open transaction survives the fence and keeps its row locks), each call
// with a retry_timeout of its own. Only the fence's failure is an error.
func (a *Agent) fenceAndKill(ctx context.Context, db Peer) error {
	fctx, cancel := a.callCtx(ctx)
	err := db.Fence(fctx)
	cancel()
	if err != nil {
		return err
	}
	kctx, cancel := a.callCtx(ctx)
	defer cancel()
	if _, err := db.KillClients(kctx); err != nil {
		a.log.Warn("killing client sessions after a fence failed", zap.Error(err))
	}
	return nil
}

// fenceOthers fences the named peers, in parallel, each observed writable
// this iteration; it reports whether every fence held.
//
//	MySQL:   SET GLOBAL super_read_only = ON; KILL CONNECTION id ...
//	MariaDB: SET GLOBAL read_only = ON; KILL HARD CONNECTION id ...
func (a *Agent) fenceOthers(ctx context.Context, names []string, peers map[string]peerProbe, kind fenceKind) bool {
	return a.onPeers(ctx, names, peers, func(cctx context.Context, name string, p Database) error {
		if err := a.fenceAndKill(cctx, p); err != nil {
			a.log.Error("fencing a writable member failed", zap.String("peer", name), zap.Error(err))
			a.labeler.Event(ctx, a.self.Name, eventWarning, "FenceFailed", fmt.Sprintf("could not fence writable member %s: %v", name, err))
			return err
		}
		a.metrics.fenced(kind)
		a.log.Warn("fenced a writable member", zap.String("peer", name), zap.Stringer("kind", kind))
		a.labeler.Event(ctx, a.self.Name, eventWarning, "FencedPeer", fmt.Sprintf("fenced %s, which was writable without the lock", name))
		return nil
	})
}

// killLocal kills our hung mysqld's process (KillLocal): a server that
// neither answers nor refuses cannot be fenced, and only a dead one
// provably takes no writes. Once it is gone the next iteration finds it
// down and releases the lock. When the kill fails (its process is not
// visible from here, say), the holder keeps the lock until mysqld answers.
func (a *Agent) killLocal(ctx context.Context, reason string) (redo bool) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	pid, err := a.killMySQL(cctx, a.pidFile)
	if err != nil {
		a.cannotKill = true
		a.log.Error("killing the hung local mysqld failed; keeping the lock until it answers", zap.String("pid_file", a.pidFile), zap.Error(err))
		return false
	}
	a.metrics.fenced(fenceKindKillHung)
	a.log.Warn("killed the hung local mysqld", zap.Int("pid", pid), zap.String("reason", reason))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "KilledHungMySQL", fmt.Sprintf("killed mysqld (pid %d): %s", pid, reason))
	return true
}

// FenceAtStart is an agent's very first act, before any step that can fail
// (the DCS client, TLS files, the Kubernetes client): it fences the local
// mysqld within timeout, so that an agent that cannot start (and is
// restarted in vain) leaves no writable server behind while a peer takes
// over. It runs mysqlctl.Instance.Fence:
//
//	MySQL:   SET GLOBAL super_read_only = ON
//	MariaDB: SET GLOBAL read_only = ON
//
// and reads the switch back. A mysqld that does not answer is logged and
// left alone: a server that is down takes no writes, and Run fences it
// once it answers. The error is for the log; the caller goes on.
func FenceAtStart(ctx context.Context, dial Dialer, addr string, timeout time.Duration, log *zap.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	db, err := dial(cctx, addr)
	if err != nil {
		log.Warn("local mysqld not reachable at start-up; it is fenced once it answers", zap.String("addr", addr), zap.Error(err))
		return fmt.Errorf("connecting to the local mysqld at start-up: %w", err)
	}
	defer closeDB(db)
	if err := db.Fence(cctx); err != nil {
		log.Error("fencing the local mysqld at start-up failed", zap.String("addr", addr), zap.Error(err))
		return fmt.Errorf("fencing the local mysqld at start-up: %w", err)
	}
	log.Info("fenced the local mysqld at start-up", zap.String("addr", addr))
	return nil
}
