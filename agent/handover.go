package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
)

// handover is a planned switchover to target, losing nothing. It stops at
// the first step that fails; redo reports that it handed over or abandoned
// the request.
//
// 1. Check the target: it must have a member record with a MySQL address
// (else wait), and publish an agent instance id (else abandon the request,
// as in step 6). Connect to its mysqld.
//
// 2. Renew the lock, so that the whole hand-over fits before our deadline.
//
// 3. Stop writes: kill the client sessions first (so that the fence does not
// wait out its grace behind a statement in flight), then fence our mysqld,
// as fenceSelf does (a failure to kill is ignored); steps 3 and 4 run under
// one retry_timeout:
//
//	MySQL:   KILL CONNECTION id ...; SET GLOBAL super_read_only = ON; KILL CONNECTION id ...
//	MariaDB: KILL HARD CONNECTION id ...; SET GLOBAL read_only = ON; KILL HARD CONNECTION id ...
//
// 4. Read our executed set, now final:
//
//	SHOW GLOBAL VARIABLES WHERE Variable_name IN (...)   -- gtid_executed | gtid_binlog_pos
//	SHOW GLOBAL STATUS WHERE Variable_name IN (...)
//	SHOW REPLICA STATUS
//
// 5. Wait, on the target's mysqld, until it has executed that set, for what
// the deadline leaves after two retry_timeouts for the steps that follow
// (none left: stop, stay fenced, and let the next iteration decide):
//
//	MySQL:   SELECT WAIT_FOR_EXECUTED_GTID_SET(set, seconds)
//	MariaDB: SELECT MASTER_GTID_WAIT(pos, seconds)
//
// 6. A target that does not catch up in time abandons the request (it is
// cleared, with a SwitchoverRejected Event) rather than retrying, since every
// retry would stop writes again; the next iteration makes us writable again.
//
// 7. Pass the lock to the target's name and agent instance in one
// compare-and-set (Store.HandoverLeader); the target promotes itself, we
// follow it.
//
// 8. Clear our deadline, drop our pod's role label (after the hand-over, not
// inside the write stop: the target drops our primary label itself before it
// unfences), record a Switchover Event, clear the request and append a
// switchover history entry with how long writes were stopped.
func (a *Agent) handover(ctx context.Context, cl *dcs.Cluster, target, reason string) (redo bool) {
	tm, ok := cl.Member(target)
	if !ok || tm.MySQLAddr == "" {
		return false
	}
	if tm.Instance == "" {
		a.rejectSwitchover(ctx, cl, fmt.Sprintf("target %s publishes no agent instance id (an older agent?): the lock cannot be handed to it safely", target))
		return true
	}
	peer, err := a.peerConn(ctx, tm.MySQLAddr)
	if err != nil {
		return false
	}
	if !a.renew(ctx) {
		return false
	}
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	// Writes stop now either way: kill the sessions first, so that the
	// fence does not wait out its grace behind a statement in flight, and
	// again after it, for sessions that arrived in between (an idle open
	// transaction survives the fence, holding its row locks).
	a.db.KillClients(cctx)
	if err := a.db.Fence(cctx); err != nil {
		a.log.Error("switchover: fencing ourselves failed", zap.Error(err))
		return false
	}
	a.db.KillClients(cctx)
	obs, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Error("switchover: observing ourselves failed", zap.Error(err))
		return false
	}
	// Leave room before the deadline for the hand-over write itself.
	wait := a.currentDeadline().Sub(a.clock.Now()) - 2*a.clusterConfig.RetryTimeout
	if wait <= 0 {
		return false
	}
	wctx, wcancel := context.WithTimeout(ctx, wait+a.clusterConfig.RetryTimeout)
	defer wcancel()
	if err := peer.WaitForGTID(wctx, obs.Status.GTIDExecuted, wait); err != nil {
		a.rejectSwitchover(ctx, cl, fmt.Sprintf("target %s did not catch up within %s: %v", target, wait.Round(time.Millisecond), err))
		return true
	}
	hctx, hcancel := a.callCtx(ctx)
	defer hcancel()
	if err := a.store.HandoverLeader(hctx, target, tm.Instance); err != nil {
		a.log.Error("switchover: handing the lock over failed", zap.Error(err))
		return false
	}
	stopped := a.clock.Since(start)
	a.setDeadline(time.Time{})
	a.metrics.IsLeader.Set(0)
	a.metrics.Switchovers.Inc()
	a.log.Info("handed the lock over", zap.String("target", target), zap.Duration("writes_stopped_for", stopped))
	// Relabelled after the hand-over, not inside the write stop: the target
	// drops our primary label itself before it unfences.
	a.setRole(ctx, dcs.RoleUnknown)
	a.labeler.Event(ctx, a.self.Name, eventNormal, "Switchover", fmt.Sprintf("handed over to %s: %s", target, reason))
	if sw := cl.Switchover; sw != nil {
		a.store.ClearSwitchover(hctx, sw.Version)
	}
	if err := a.store.AppendHistory(hctx, dcs.HistoryEntry{Kind: dcs.HistorySwitchover, From: a.self.Name, To: target,
		At: a.clock.Now(), Reason: reason, WriteUnavailable: stopped}); err != nil {
		a.log.Warn("appending history failed", zap.Error(err))
	}
	return true
}

func (a *Agent) clearRequest(ctx context.Context, cl *dcs.Cluster, reason string) {
	if cl.Switchover == nil {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ClearSwitchover(cctx, cl.Switchover.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the fulfilled request failed", zap.Error(err))
		return
	}
	a.log.Info("cleared the pending request", zap.String("reason", reason))
}

// rejectSwitchover clears a request that cannot be carried out (or cannot
// be read) and says why in a log line and an Event.
func (a *Agent) rejectSwitchover(ctx context.Context, cl *dcs.Cluster, reason string) {
	a.log.Warn("rejecting switchover request", zap.String("reason", reason))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "SwitchoverRejected", reason)
	if cl.Switchover == nil {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ClearSwitchover(cctx, cl.Switchover.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the switchover request failed", zap.Error(err))
	}
}
