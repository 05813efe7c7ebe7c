package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// RestartOptions are the flags of `agentctl restart MEMBER`.
type RestartOptions struct {
	Member string
	// To is the switchover target when Member leads; "" lets the leader
	// choose the best replica.
	To string
	// Force skips the confirmation.
	Force bool
	// Wait waits until the member streams from the leader again, or its
	// agent reports the restart failed. Timeout bounds the switchover, and
	// the wait.
	Wait    bool
	Timeout time.Duration
	// Cancel withdraws the pending request instead; a restart its agent
	// has begun still finishes.
	Cancel bool
}

// Restart asks a member's agent to restart its mysqld: to apply a setting
// that needs a restart, say. A replica restarts at once; the leader first
// hands over to another member (a switchover), so that writes pause for a
// switchover's gap, not for a restart.
func (c *CLI) Restart(ctx context.Context, o RestartOptions) error {
	if o.Member == "" {
		return fail(ExitUsage, "restart needs the MEMBER whose mysqld to restart")
	}
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	if o.Cancel {
		return c.cancelRestart(ctx, cl, o.Member)
	}
	target, ok := cl.Member(o.Member)
	if !ok {
		return unknownMember(cl, o.Member)
	}
	switch {
	case cl.Restart != nil && cl.Restart.Err != nil:
		return fail(ExitPending, "an unreadable restart request is stored (%v); clear it with `agentctl restart %s --cancel`", cl.Restart.Err, o.Member)
	case cl.Restart != nil:
		return fail(ExitPending, "a restart of %s is already pending; wait for it, or withdraw it with `agentctl restart %s --cancel`", cl.Restart.Member, cl.Restart.Member)
	case target.Stale:
		return fail(ExitUnhealthy, "%s's agent is not running (stale record): it performs the restart, so start it first", o.Member)
	case cl.ReinitPending(o.Member):
		return fail(ExitPending, "%s is being rebuilt (agentctl reinit), which restarts its mysqld anyway", o.Member)
	}
	leads := cl.Leader != nil && !cl.Leader.Expired && cl.Leader.Holder == o.Member
	if o.To != "" && !leads {
		return fail(ExitUsage, "--to names the member that takes over from a leader; %s does not lead", o.Member)
	}
	if leads {
		if err := c.checkHandOver(cl, o); err != nil {
			return err
		}
	}
	if !o.Force {
		if leads {
			fmt.Fprintf(c.errOut(), "Plan: %s hands the lock to %s (a switchover), then restarts its mysqld and replicates from the new leader.\n", o.Member, orBest(o.To))
		} else {
			fmt.Fprintf(c.errOut(), "Plan: %s's mysqld shuts down cleanly, its supervisor starts it again, and it replicates from the leader.\n", o.Member)
		}
		if err := c.confirm(fmt.Sprintf("Restart the mysqld of %s?", o.Member)); err != nil {
			return err
		}
	}
	r := Result{Command: "restart", Member: o.Member, Message: "restart requested"}
	if leads {
		if r.Primary, err = c.handOverBeforeRestart(ctx, cl, o); err != nil {
			return err
		}
	}
	before := lastOutcome(cl, dcs.HistoryRestart, o.Member)
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	if err := c.Store.RequestRestart(wctx, dcs.Restart{Member: o.Member}); err != nil {
		if errors.Is(err, dcs.ErrExists) {
			return fail(ExitPending, "a restart request is already pending")
		}
		return fmt.Errorf("writing the restart request: %w", err)
	}
	c.say("Restart requested: %s\n", o.Member)
	if o.Wait {
		if err := c.waitOutcome(ctx, outcomeWait{kind: dcs.HistoryRestart, member: o.Member, before: before, timeout: o.Timeout,
			doing: "restarting", done: "restarted", failed: func(reason string) bool { return reason != "done" },
			pending: func(cl *dcs.Cluster) bool { return cl.Restart != nil && cl.Restart.Member == o.Member }}); err != nil {
			return err
		}
		r.Message = o.Member + " was restarted and streams from the leader"
	}
	return c.finish(r)
}

// checkHandOver refuses a leader's restart that no switchover can precede.
func (c *CLI) checkHandOver(cl *dcs.Cluster, o RestartOptions) error {
	if cl.Config.Paused {
		return fail(ExitRejected, "%s leads and the cluster is paused, so it cannot switch over first; run `agentctl resume`, or restart its mysqld yourself and accept the outage", o.Member)
	}
	if cl.Switchover != nil {
		return fail(ExitPending, "a switchover is already pending (%s); wait for it, or withdraw it with `agentctl switchover --cancel`", describeRequest(cl.Switchover))
	}
	rules := failover.RulesOf(cl.Config)
	if o.To == o.Member {
		return fail(ExitUsage, "--to names the member that takes over from %s: give another member", o.Member)
	}
	if o.To != "" {
		m, err := candidate(cl, o.To)
		if err != nil {
			return err
		}
		if why := failover.Ineligibility(m, rules); why != "" {
			return fail(ExitUnhealthy, "%s cannot take over from %s: %s", o.To, o.Member, why)
		}
		return nil
	}
	for _, m := range cl.Members {
		if m.Name == o.Member {
			continue
		}
		if fm, err := candidate(cl, m.Name); err == nil && failover.Ineligibility(fm, rules) == "" {
			return nil
		}
	}
	return fail(ExitUnhealthy, "%s leads and no other member can take over (see `agentctl status`), so its restart would stop writes; restart its mysqld yourself if you accept the outage", o.Member)
}

// handOverBeforeRestart switches over from the leader o.Member and waits
// for the new primary, which it returns.
func (c *CLI) handOverBeforeRestart(ctx context.Context, cl *dcs.Cluster, o RestartOptions) (string, error) {
	wctx, wcancel := c.bounded(ctx)
	err := c.Store.RequestSwitchover(wctx, dcs.Switchover{From: o.Member, To: o.To})
	wcancel()
	if err != nil {
		if errors.Is(err, dcs.ErrExists) {
			return "", fail(ExitPending, "a switchover is already pending")
		}
		return "", fmt.Errorf("writing the switchover request before the restart: %w", err)
	}
	c.say("Switchover requested: %s -> %s, before its restart\n", o.Member, orBest(o.To))
	primary, err := c.waitNewPrimary(ctx, o.Member, o.To, o.Timeout, len(cl.History))
	if err != nil {
		return "", fmt.Errorf("%w; %s's mysqld was not restarted", err, o.Member)
	}
	return primary, nil
}

// cancelRestart withdraws the pending request: member's, or an unreadable
// one whoever it named.
func (c *CLI) cancelRestart(ctx context.Context, cl *dcs.Cluster, member string) error {
	req := cl.Restart
	switch {
	case req == nil:
		return fail(ExitRejected, "no restart request is pending")
	case req.Err == nil && req.Member != member:
		return fail(ExitRejected, "the pending restart is of %s, not %s", req.Member, member)
	}
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	if err := c.Store.ClearRestart(wctx, req.Version); err != nil {
		if errors.Is(err, dcs.ErrNotFound) || errors.Is(err, dcs.ErrConflict) {
			return fail(ExitRejected, "the restart request is gone or changed already (see `agentctl history`)")
		}
		return fmt.Errorf("withdrawing the restart request: %w", err)
	}
	c.say("Restart of %s withdrawn\n", member)
	return c.finish(Result{Command: "restart", Member: member, Message: "restart withdrawn"})
}

// orBest names a switchover target, "" being the leader's choice.
func orBest(to string) string {
	if to == "" {
		return "the best replica"
	}
	return to
}
