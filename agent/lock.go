package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// renewIfDue renews the lock when half a loop_wait has passed since the last
// renewal, or when we hold no deadline of our own yet.
func (a *Agent) renewIfDue(ctx context.Context) bool {
	return a.startRenewalIfDue(ctx)()
}

// startRenewalIfDue is renewIfDue with the DCS request in flight while the
// caller goes on: the returned function waits for its answer and records
// it, as renew does, and reports whether we hold the lock. Call it, on the
// loop's goroutine, before anything that needs the deadline; later calls
// return the same answer.
func (a *Agent) startRenewalIfDue(ctx context.Context) (held func() bool) {
	if a.clock.Since(a.lastRenewStart) < a.clusterConfig.LoopWait/2 && a.hasDeadline() {
		return func() bool { return true }
	}
	return a.startRenewal(ctx)
}

// renew extends our lock. On success the deadline moves to start + ttl -
// safety_margin, measured from the start of the request.
func (a *Agent) renew(ctx context.Context) bool {
	return a.startRenewal(ctx)()
}

// startRenewal sends a renewal and returns the function that waits for its
// answer and records it (see startRenewalIfDue).
func (a *Agent) startRenewal(ctx context.Context) (held func() bool) {
	if a.failsafeActive {
		// The DCS did not answer last time: ask the members first, so that
		// a renewal that times out again does not eat up the deadline.
		a.failsafeRenew(ctx, a.clock.Now())
	}
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	answer := make(chan error, 1)
	go func(ttl time.Duration) {
		defer cancel()
		answer <- a.store.RenewLeader(cctx, ttl)
	}(a.clusterConfig.TTL)
	var done, ok bool
	return func() bool {
		if !done {
			done, ok = true, a.renewed(ctx, start, <-answer)
		}
		return ok
	}
}

// renewed records the answer to a renewal that started at start.
func (a *Agent) renewed(ctx context.Context, start time.Time, err error) bool {
	if err != nil {
		a.metrics.RenewFailures.Inc()
		a.metrics.dcsFailed(dcsOpRenew)
		if errors.Is(err, dcs.ErrNotLeader) {
			a.log.Warn("lost the leader lock", zap.Error(err))
			a.fenceSelf(ctx, fenceKindSelf, "lost the leader lock")
			return false
		}
		if errors.Is(err, dcs.ErrForbidden) {
			// Refused (403, 401): the DCS answers, and will not let us
			// hold the lock. Failsafe mode keeps a leader writable through
			// a DCS it cannot reach; this one it reaches, and the lock will
			// lapse at its ttl for another member to take.
			a.log.Error("the DCS refused the lock renewal (forbidden or unauthorized): it is reachable, so failsafe mode does not apply; fencing now", zap.Error(err))
			a.failsafeActive = false
			a.metrics.FailsafeActive.Set(0)
			a.fenceSelf(ctx, fenceKindSelf, "the DCS refused the lock renewal")
			return false
		}
		a.log.Warn("renewing the leader lock failed", zap.Error(err))
		if a.failsafeActive {
			return true // confirmed just above
		}
		return a.failsafeRenew(ctx, start)
	}
	a.dcsReached()
	a.metrics.RenewLatency.Observe(a.clock.Since(start).Seconds())
	a.heldFrom(start)
	return true
}

// heldFrom records a successful acquisition, renewal or take-over of the
// lock whose request started at start: we may write until start + ttl -
// safety_margin. Each is a DCS write that succeeded.
func (a *Agent) heldFrom(start time.Time) {
	a.metrics.dcsSucceeded(a.clock.Now())
	a.lastRenewStart = start
	a.setDeadline(start.Add(a.clusterConfig.TTL - a.clusterConfig.SafetyMargin))
	a.metrics.IsLeader.Set(1)
}

func (a *Agent) acquire(ctx context.Context) bool {
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	err := a.store.AcquireLeader(cctx, a.clusterConfig.TTL)
	cancel()
	if err != nil {
		if !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
			a.metrics.dcsFailed(dcsOpAcquire)
		}
		a.log.Info("did not win the leader lock", zap.Error(err))
		return false
	}
	a.heldFrom(start)
	a.log.Info("won the leader lock")
	return true
}

func (a *Agent) release(ctx context.Context, reason string, unfenced bool) {
	if a.hasDeadline() && !unfenced {
		// Giving the lock up lets another member promote at once: only when
		// our mysqld is read-only or provably not running.
		if err := a.fenceSelf(ctx, fenceKindSelf, reason); err != nil && !errors.Is(err, mysqlctl.ErrDown) {
			a.log.Error("not releasing the leader lock: mysqld could not be fenced and is not known to be down", zap.Error(err))
			return
		}
	}
	a.setDeadline(time.Time{})
	a.metrics.IsLeader.Set(0)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ReleaseLeader(cctx); err != nil && !errors.Is(err, dcs.ErrNotLeader) {
		a.metrics.dcsFailed(dcsOpRelease)
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
