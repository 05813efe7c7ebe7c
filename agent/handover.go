package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// handover is a planned switchover to target, losing nothing. It stops at
// the first step that fails; redo reports that it handed over or abandoned
// the request. Whether the target is close enough to stop writes for was
// decided before (failover.SwitchoverMaxBehind), while we were writable.
//
// 1. Check the target: it must have a member record with a MySQL address
// (else wait), and publish an agent instance id (else abandon the request,
// as in step 6). Connect to its mysqld.
//
// 2. Renew the lock, so that the whole hand-over fits before our deadline.
// The first attempt at a request fixes the switchover's deadline: what the
// lock deadline leaves after two retry_timeouts for the steps that follow,
// or, for --allow-lag, maximum_lag_on_failover (at least that). Every
// attempt at the same request stops writes only within it.
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
// 5. Wait, on the target's mysqld, until it has executed that set, or the
// switchover's deadline passes (waitForTarget).
//
// 6. A target that does not catch up in time abandons the request
// (abandonHandover): we become writable again at once if a renewal proves
// the lock is still ours, else stay fenced for the next iteration to
// decide; the request is cleared with a switchover-rejected history entry
// and Event, rather than retried, since every retry would stop writes
// again.
//
// 7. Pass the lock to the target's name and agent instance in one
// compare-and-set (Store.HandoverLeader); the target promotes itself, we
// follow it.
//
// 8. Clear our deadline, drop our pod's role label (after the hand-over, not
// inside the write stop: the target drops our primary label itself once it
// is writable, before it labels itself), record a Switchover Event, clear
// the request and append a switchover history entry with how long writes
// were stopped.
func (a *Agent) handover(ctx context.Context, cl *dcs.Cluster, target, reason string) (redo bool) {
	tm, ok := cl.Member(target)
	if !ok || tm.MySQLAddr == "" {
		return false
	}
	if tm.Instance == "" {
		a.rejectSwitchover(ctx, cl, target, fmt.Sprintf("target %s publishes no agent instance id (an older agent?): the lock cannot be handed to it safely", target))
		return true
	}
	peer, err := a.peerConn(ctx, tm.MySQLAddr)
	if err != nil {
		return false
	}
	if !a.renew(ctx) {
		return false
	}
	until := a.switchoverDeadlineFor(cl.Switchover)
	if !a.clock.Now().Before(until) {
		a.abandonHandover(ctx, cl, target, fmt.Sprintf("switchover to %s: its deadline passed before the target caught up", target))
		return true
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
	if err := a.waitForTarget(ctx, peer, obs.Status.GTIDExecuted, until); err != nil {
		a.abandonHandover(ctx, cl, target, fmt.Sprintf("target %s did not catch up after %s with writes stopped: %v",
			target, a.clock.Since(start).Round(time.Millisecond), err))
		return true
	}
	hctx, hcancel := a.callCtx(ctx)
	defer hcancel()
	if err := a.store.HandoverLeader(hctx, target, tm.Instance); err != nil {
		a.log.Error("switchover: handing the lock over failed", zap.Error(err))
		return false
	}
	stopped := a.clock.Since(start)
	a.handoverDeadline = switchoverDeadline{}
	a.setDeadline(time.Time{})
	a.metrics.IsLeader.Set(0)
	a.metrics.Switchovers.Inc()
	a.log.Info("handed the lock over", zap.String("target", target), zap.Duration("writes_stopped_for", stopped))
	// Relabelled after the hand-over, not inside the write stop: the target
	// drops our primary label itself before it labels itself.
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

// switchoverDeadline is the one deadline of the switchover request whose
// version it names.
type switchoverDeadline struct {
	version string
	until   time.Time
}

// switchoverDeadlineFor returns the deadline of request sw ("" version for
// a hand-over without one: the agent stopping), fixing it on the first
// attempt, just after a renewal: what the lock deadline leaves after two
// retry_timeouts for the hand-over write; with --allow-lag at least
// maximum_lag_on_failover (a minute when unset), as an eligible target's
// backlog is at most about that long to apply.
func (a *Agent) switchoverDeadlineFor(sw *dcs.Switchover) time.Time {
	version, allowLag := "", false
	if sw != nil {
		version, allowLag = sw.Version, sw.Force
	}
	if d := a.handoverDeadline; d.version == version && !d.until.IsZero() {
		return d.until
	}
	now := a.clock.Now()
	budget := a.currentDeadline().Sub(now) - 2*a.clusterConfig.RetryTimeout
	if allowLag {
		budget = max(budget, cmp.Or(a.clusterConfig.MaximumLagOnFailover, time.Minute))
	}
	a.handoverDeadline = switchoverDeadline{version: version, until: now.Add(budget)}
	return a.handoverDeadline.until
}

// errSwitchoverDeadline: the switchover's deadline passed while waiting.
var errSwitchoverDeadline = errors.New("the switchover's deadline passed")

// waitForTarget waits on the target's mysqld until it has executed set,
// until the switchover's deadline at the latest. Each wait ends two
// retry_timeouts before our lock deadline, leaving room for the hand-over
// write; between waits the lock is renewed, so that a hand-over with
// --allow-lag may wait past one lock period:
//
//	MySQL:   SELECT WAIT_FOR_EXECUTED_GTID_SET(set, seconds)
//	MariaDB: SELECT MASTER_GTID_WAIT(pos, seconds)
func (a *Agent) waitForTarget(ctx context.Context, peer Peer, set string, until time.Time) error {
	retry := a.clusterConfig.RetryTimeout
	for {
		now := a.clock.Now()
		left := until.Sub(now)
		if left <= 0 {
			return errSwitchoverDeadline
		}
		wait := min(left, a.currentDeadline().Sub(now)-2*retry)
		if wait <= 0 {
			if !a.renew(ctx) {
				return errors.New("renewing the lock between waits failed")
			}
			if a.currentDeadline().Sub(a.clock.Now()) <= 2*retry {
				return errors.New("the lock deadline leaves no time to wait")
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, wait+retry)
		err := peer.WaitForGTID(wctx, set, wait)
		cancel()
		if err == nil {
			return nil
		}
		// Another wait only after one that timed out having waited its
		// full time; anything else ends the hand-over.
		if !errors.Is(err, mysqlctl.ErrTimeout) || a.clock.Now().Before(now.Add(wait)) {
			return fmt.Errorf("waiting for the target to execute %s: %w", set, err)
		}
	}
}

// abandonHandover gives up a hand-over after writes were stopped for it.
// It leaves the cluster with a writable primary when it may: a renewal,
// a compare-and-set on our own holding of the lock, proves the lock is
// still ours, and only then do we unfence (with room before the deadline
// for it); otherwise we stay read-only, and the next iteration decides
// who leads. Then the request is rejected with reason.
//
//	MySQL:   SET GLOBAL super_read_only = OFF; SET GLOBAL read_only = OFF
//	MariaDB: SET GLOBAL read_only = OFF
func (a *Agent) abandonHandover(ctx context.Context, cl *dcs.Cluster, target, reason string) {
	a.handoverDeadline = switchoverDeadline{}
	if a.stopping {
		a.failedTargets = append(a.failedTargets, target)
	}
	if a.renew(ctx) && a.canWriteFor(a.clusterConfig.RetryTimeout) {
		cctx, cancel := a.callCtx(ctx)
		err := a.db.Unfence(cctx)
		cancel()
		if err != nil {
			a.log.Error("switchover abandoned: unfencing failed; the next iteration retries", zap.Error(err))
		} else {
			a.log.Info("switchover abandoned: writable again, the lock is still ours")
		}
	} else {
		a.log.Warn("switchover abandoned: staying read-only, the lock could not be proven ours")
	}
	a.rejectSwitchover(ctx, cl, target, reason)
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
// be read) and says why in a log line, an Event and a switchover-rejected
// history entry. The entry is written before the request is cleared, so
// that agentctl switchover --wait, which waits for the request to go,
// finds the reason with it.
func (a *Agent) rejectSwitchover(ctx context.Context, cl *dcs.Cluster, target, reason string) {
	a.log.Warn("rejecting switchover request", zap.String("target", target), zap.String("reason", reason))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "SwitchoverRejected", reason)
	if cl.Switchover == nil {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.AppendHistory(cctx, dcs.HistoryEntry{Kind: dcs.HistorySwitchoverRejected, From: a.self.Name, To: target,
		At: a.clock.Now(), Reason: reason}); err != nil {
		a.log.Warn("appending history failed", zap.Error(err))
	}
	if err := a.store.ClearSwitchover(cctx, cl.Switchover.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the switchover request failed", zap.Error(err))
	}
}
