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
		from, why := a.lostLeader(o.cl)
		detected := a.leaderlessSince
		if !a.acquire(ctx) {
			return false
		}
		a.failoverFrom = &failoverStart{from: from, detected: detected, acquired: a.clock.Now(), reason: why}
		a.metrics.Failovers.Inc()
		took := fmt.Sprintf("took the lock from lost leader %q", from)
		if why != "" {
			took = "took the lock: " + why
		}
		a.labeler.Event(ctx, a.self.Name, eventNormal, "LeaderLost", took+": "+action.Reason)
		return true
	case failover.TakeOver:
		return a.takeOver(ctx, o.cl, action)
	case failover.Lead:
		if !a.renewIfDue(ctx) {
			return false
		}
		if action.RenewOnly {
			return action.DecideAgain
		}
		a.fenceOthers(ctx, action.Fence, o.peers, fenceKindRemoteWritable)
		a.steadyPrimary(ctx, o.obs)
		a.trackAcknowledgers(o)
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

// lostLeader names the leader an acquisition takes the lock from (for the
// history, and as the promotion's former leader, whose data is no
// candidate's), and why the lock was free when that is more than the loss
// of the leader named ("" then). The lock's holder, or,
// when the lock is gone (an etcd key vanishes with its lease) or unreadable
// (dcs.UnknownHolder, which is no member), the last holder we read; "" when
// that is ourselves or nobody.
func (a *Agent) lostLeader(cl *dcs.Cluster) (from, why string) {
	from = a.lastLeader
	unreadable := cl.Leader != nil && cl.Leader.Holder == dcs.UnknownHolder
	if cl.Leader != nil && !unreadable {
		from = cl.Leader.Holder
	}
	if from == a.self.Name {
		from = ""
	}
	switch {
	case unreadable && from != "":
		return from, "leader lost; its lock record was unreadable, and the last leader it named was " + from
	case unreadable:
		return from, "leader lost; its lock record was unreadable, and no earlier leader was seen"
	case from == "":
		return "", "leader lost"
	}
	return from, ""
}
