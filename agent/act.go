package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// observed is what one iteration saw, handed from observe to act.
type observed struct {
	cl       *dcs.Cluster
	obs      mysqlctl.Observation // our mysqld
	localErr error
	peers    map[string]peerProbe // probed peers, by member name; nil when not probed
}

// act carries out one decision; it decides nothing. Every step is
// idempotent. redo asks the loop to iterate again at once, because the step
// changed what the next decision depends on (a lock won, a peer fenced).
func (a *Agent) act(ctx context.Context, action failover.Action, o observed) (redo bool) {
	switch action.Kind {
	case failover.FenceSelf:
		a.fenceSelf(ctx, "self", action.Reason)
	case failover.Refuse:
		if o.localErr == nil && o.obs.Status.Writable() || a.hasDeadline() { // fenced already otherwise
			a.fenceSelf(ctx, "duplicate", action.Reason)
		}
	case failover.ReleaseLock:
		a.release(ctx, action.Reason)
		if action.StandDown {
			a.standDownUntil = a.clock.Now().Add(2 * a.clusterConfig.TTL)
		}
	case failover.Bootstrap:
		if !a.hasDeadline() && !a.acquire(ctx) {
			return false
		}
		return a.bootstrap(ctx, o.cl)
	case failover.Acquire:
		from := a.lastLeader
		if o.cl.Leader != nil && o.cl.Leader.Holder != dcs.UnknownHolder {
			from = o.cl.Leader.Holder
		}
		if from == a.self.Name {
			from = ""
		}
		detected := a.leaderlessSince
		if !a.acquire(ctx) {
			return false
		}
		a.failoverFrom = &failoverStart{from: from, detected: detected, acquired: a.clock.Now()}
		a.metrics.Failovers.Inc()
		a.labeler.Event(ctx, a.self.Name, eventNormal, "LeaderLost", fmt.Sprintf("took the lock from lost leader %q: %s", from, action.Reason))
		return true
	case failover.Lead:
		hadDeadline := a.hasDeadline()
		if !a.renewIfDue(ctx) {
			return false
		}
		if action.RenewOnly {
			// A lock handed to us, or held from before: now that it is ours
			// to write under, decide again at once.
			return !hadDeadline
		}
		a.fenceOthers(ctx, action.Fence, o.peers, "remote-writable")
		a.steadyPrimary(ctx, o.obs)
	case failover.Promote:
		if !a.renewIfDue(ctx) {
			return false
		}
		return a.promote(ctx, action, o)
	case failover.Follow:
		a.follow(ctx, o.cl, o.obs, action.Target)
	case failover.Switchover:
		return a.handover(ctx, o.cl, action.Target, action.Reason)
	case failover.RejectSwitchover:
		a.rejectSwitchover(ctx, o.cl, action.Reason)
		return true
	case failover.ClearRequest:
		a.clearRequest(ctx, o.cl, action.Reason)
		return true
	case failover.Idle, failover.WaitForBetter:
	}
	return false
}

// renewIfDue renews the lock when half a loop_wait has passed since the last
// renewal, or when we hold no deadline of our own yet.
func (a *Agent) renewIfDue(ctx context.Context) bool {
	if a.clock.Since(a.lastRenewStart) < a.clusterConfig.LoopWait/2 && a.hasDeadline() {
		return true
	}
	return a.renew(ctx)
}

// renew extends our lock. On success the deadline moves to start + ttl -
// safety_margin, measured from the start of the request.
func (a *Agent) renew(ctx context.Context) bool {
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	err := a.store.RenewLeader(cctx, a.clusterConfig.TTL)
	cancel()
	if err != nil {
		a.metrics.RenewFailures.Inc()
		a.metrics.DCSErrors.WithLabelValues("renew").Inc()
		if errors.Is(err, dcs.ErrNotLeader) {
			a.log.Warn("lost the leader lock", zap.Error(err))
			a.fenceSelf(ctx, "self", "lost the leader lock")
			return false
		}
		a.log.Warn("renewing the leader lock failed", zap.Error(err))
		return false
	}
	a.metrics.RenewLatency.Observe(a.clock.Since(start).Seconds())
	a.lastRenewStart = start
	a.setDeadline(start.Add(a.clusterConfig.TTL - a.clusterConfig.SafetyMargin))
	a.metrics.IsLeader.Set(1)
	return true
}

func (a *Agent) acquire(ctx context.Context) bool {
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	err := a.store.AcquireLeader(cctx, a.clusterConfig.TTL)
	cancel()
	if err != nil {
		if !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
			a.metrics.DCSErrors.WithLabelValues("acquire").Inc()
		}
		a.log.Info("did not win the leader lock", zap.Error(err))
		return false
	}
	a.lastRenewStart = start
	a.setDeadline(start.Add(a.clusterConfig.TTL - a.clusterConfig.SafetyMargin))
	a.metrics.IsLeader.Set(1)
	a.log.Info("won the leader lock")
	return true
}

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
func (a *Agent) fenceSelf(ctx context.Context, kind, reason string) error {
	a.metrics.FencingActions.WithLabelValues(kind).Inc()
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

func (a *Agent) release(ctx context.Context, reason string) {
	if a.hasDeadline() {
		// Giving the lock up lets another member promote at once: only when
		// our mysqld is read-only or provably not running.
		if err := a.fenceSelf(ctx, "self", reason); err != nil && !errors.Is(err, mysqlctl.ErrDown) {
			a.log.Error("not releasing the leader lock: mysqld could not be fenced and is not known to be down", zap.Error(err))
			return
		}
	}
	a.setDeadline(time.Time{})
	a.metrics.IsLeader.Set(0)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ReleaseLeader(cctx); err != nil && !errors.Is(err, dcs.ErrNotLeader) {
		a.metrics.DCSErrors.WithLabelValues("release").Inc()
		a.log.Warn("releasing the leader lock failed", zap.Error(err))
		return
	}
	a.log.Warn("released the leader lock", zap.String("reason", reason))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "Demoted", "released the leader lock: "+reason)
	a.setRole(ctx, dcs.RoleUnknown)
}

// bootstrap records the cluster's config and identity while holding the lock
// of an uninitialised cluster. Each record is written once, so a crash
// between any two steps is repaired by the next attempt; the cluster is
// initialised only once both are stored, and only then may we promote.
func (a *Agent) bootstrap(ctx context.Context, cl *dcs.Cluster) bool {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if cl.ConfigVersion == "" {
		err := a.store.SetConfig(cctx, a.self.Bootstrap, "")
		if err != nil && !errors.Is(err, dcs.ErrConflict) {
			a.log.Error("storing the bootstrap config failed; retrying before the cluster is initialised", zap.Error(err))
			return false
		}
	}
	st, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Warn("observing mysqld for bootstrap failed", zap.Error(err))
		return false
	}
	id := st.Status.ServerUUID
	if id == "" {
		id = fmt.Sprintf("mariadb-server-%d", st.Status.ServerID)
	}
	err = a.store.SetInitialized(cctx, dcs.Initialized{ClusterID: id, FirstGTID: st.Status.GTIDExecuted, Bootstrapper: a.self.Name})
	if err != nil && !errors.Is(err, dcs.ErrExists) {
		a.log.Error("recording the cluster identity failed; retrying", zap.Error(err))
		return false
	}
	a.log.Info("bootstrapped the cluster", zap.String("cluster_id", id))
	return true
}

// steadyPrimary keeps a running primary's settings right:
//
//	MySQL:   SET GLOBAL rpl_semi_sync_source_enabled = ON|OFF (and its timeout)
//	MariaDB: SET GLOBAL rpl_semi_sync_master_enabled = ON|OFF (and its timeout)
func (a *Agent) steadyPrimary(ctx context.Context, obs mysqlctl.Observation) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	want := a.clusterConfig.SemiSync != dcs.SemiSyncOff
	if obs.Status.SemiSync.SourceEnabled != want || (want && obs.Status.SemiSync.SourceTimeout != a.semiSyncTimeout()) {
		if err := a.db.SetSemiSyncSource(cctx, want, a.semiSyncTimeout(), 1); err != nil {
			a.log.Warn("setting source semi-sync failed", zap.Error(err))
		}
	}
	a.setRole(ctx, dcs.RolePrimary)
}

func (a *Agent) semiSyncTimeout() time.Duration {
	if a.clusterConfig.SemiSync == dcs.SemiSyncStrict {
		// Effectively never fall back to asynchronous.
		return 365 * 24 * time.Hour
	}
	if a.self.SemiSyncTimeout > 0 {
		return a.self.SemiSyncTimeout
	}
	return 10 * time.Second
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
func (a *Agent) fenceOthers(ctx context.Context, names []string, peers map[string]peerProbe, kind string) bool {
	return a.onPeers(ctx, names, peers, func(cctx context.Context, name string, p Database) error {
		if err := a.fenceAndKill(cctx, p); err != nil {
			a.log.Error("fencing a writable member failed", zap.String("peer", name), zap.Error(err))
			a.labeler.Event(ctx, a.self.Name, eventWarning, "FenceFailed", fmt.Sprintf("could not fence writable member %s: %v", name, err))
			return err
		}
		a.metrics.FencingActions.WithLabelValues(kind).Inc()
		a.log.Warn("fenced a writable member", zap.String("peer", name), zap.String("kind", kind))
		a.labeler.Event(ctx, a.self.Name, eventWarning, "FencedPeer", fmt.Sprintf("fenced %s, which was writable without the lock", name))
		return nil
	})
}

// onPeers runs f on each named probed peer in parallel under one
// retry_timeout bound and reports whether it succeeded on all of them.
func (a *Agent) onPeers(ctx context.Context, names []string, peers map[string]peerProbe, f func(context.Context, string, Database) error) bool {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	errs := make([]error, len(names))
	done := make(chan struct{})
	for i, name := range names {
		go func() {
			defer func() { done <- struct{}{} }()
			p, ok := peers[name]
			if !ok || p.db == nil {
				errs[i] = fmt.Errorf("%s was not probed", name)
				return
			}
			errs[i] = f(cctx, name, p.db)
		}()
	}
	for range names {
		<-done
	}
	return errors.Join(errs...) == nil
}
