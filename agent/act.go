package agent

import (
	"context"
	"fmt"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// act carries out one decision; it decides nothing. Every step is
// idempotent. redo asks the loop to iterate again at once, because the step
// changed what the next decision depends on (a lock won, a peer fenced).
func (a *Agent) act(ctx context.Context, action failover.Action, o observed) (redo bool) {
	switch action.Kind {
	case failover.FenceSelf:
		a.fenceSelf(ctx, fenceKindSelf, action.Reason)
	case failover.Refuse:
		if o.localErr == nil && o.obs.Status.Writable() || a.hasDeadline() { // fenced already otherwise
			a.fenceSelf(ctx, fenceKindDuplicate, action.Reason)
		}
	case failover.KillLocal:
		return a.killLocal(ctx, action.Reason)
	case failover.ReleaseLock:
		a.release(ctx, action.Reason, action.Unfenced)
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
	case failover.TakeOver:
		return a.takeOver(ctx, o.cl, action)
	case failover.Lead:
		hadDeadline := a.hasDeadline()
		if !a.renewIfDue(ctx) {
			return false
		}
		if action.RenewOnly {
			// A lock held without a renewal of ours: now that it is ours
			// to write under, decide again at once.
			return !hadDeadline
		}
		a.fenceOthers(ctx, action.Fence, o.peers, fenceKindRemoteWritable)
		a.steadyPrimary(ctx, o.obs)
	case failover.Promote:
		// The promotion's steps before unfencing need no deadline: they
		// run while the renewal is in flight (a hand-over's target has no
		// deadline yet, and its first renewal would add to the write gap).
		held := a.startRenewalIfDue(ctx)
		redo = a.promote(ctx, action, o, held)
		return held() && redo
	case failover.Follow:
		a.follow(ctx, o.cl, o.obs, action.Target)
	case failover.Switchover:
		return a.handover(ctx, o.cl, action.Target, action.Reason)
	case failover.RejectSwitchover:
		a.rejectSwitchover(ctx, o.cl, action.Target, action.Reason)
		return true
	case failover.ClearRequest:
		a.clearRequest(ctx, o.cl, action.Reason)
		return true
	case failover.Idle, failover.WaitForBetter:
	}
	return false
}
