package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// ReinitOptions are the flags of `agentctl reinit MEMBER`.
type ReinitOptions struct {
	Member string
	// From names the donor; "" lets the member's agent choose the best
	// streaming replica, else the leader.
	From string
	// Force skips the confirmation.
	Force bool
	// Wait waits until the member streams from the leader again, or its
	// agent reports the rebuild failed, for at most Timeout.
	Wait    bool
	Timeout time.Duration
	// Cancel withdraws the pending request instead; a rebuild past its
	// swap still finishes.
	Cancel bool
}

// Reinit asks a member's agent to replace its data with a donor's backup:
// for an old primary with errant transactions, or a replica whose source
// purged the binary logs it needs. The member's data is discarded.
func (c *CLI) Reinit(ctx context.Context, o ReinitOptions) error {
	if o.Member == "" {
		return fail(ExitUsage, "reinit needs the MEMBER to rebuild")
	}
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	if o.Cancel {
		return c.cancelReinit(ctx, cl, o.Member)
	}
	target, ok := cl.Member(o.Member)
	if !ok {
		return unknownMember(cl, o.Member)
	}
	if cl.Reinit != nil {
		return fail(ExitPending, "a reinit of %s is already pending; wait for it, or withdraw it with `agentctl reinit %s --cancel`", cl.Reinit.Member, cl.Reinit.Member)
	}
	if l := cl.Leader; l != nil && !l.Expired && l.Holder == o.Member {
		return fail(ExitRejected, "%s holds the leader lock; switch over first (`agentctl switchover`), then rebuild it", o.Member)
	}
	if target.Stale {
		return fail(ExitUnhealthy, "%s's agent is not running (stale record): it performs the rebuild, so start it first", o.Member)
	}
	if o.From != "" {
		if _, ok := cl.Member(o.From); !ok {
			return unknownMember(cl, o.From)
		}
	}
	donor, err := failover.ReinitDonor(cl, o.Member, o.From)
	if err != nil {
		return fail(ExitUnhealthy, "no donor for %s: %v", o.Member, err)
	}
	if !o.Force {
		fmt.Fprintf(c.errOut(), "Plan: %s discards its data, copies a backup of %s, restarts its mysqld and replicates from the leader.\n", o.Member, donor.Name)
		if err := c.confirm(fmt.Sprintf("Rebuild %s from %s?", o.Member, donor.Name)); err != nil {
			return err
		}
	}
	before := lastOutcome(cl, dcs.HistoryReinit, o.Member)
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	// The agent re-checks the donor when it starts; naming the one judged
	// here keeps the operator's confirmation true.
	if err := c.Store.RequestReinit(wctx, dcs.Reinit{Member: o.Member, Donor: donor.Name}); err != nil {
		if errors.Is(err, dcs.ErrExists) {
			return fail(ExitPending, "a reinit request is already pending")
		}
		return fmt.Errorf("writing the reinit request: %w", err)
	}
	c.say("Reinit requested: %s from %s\n", o.Member, donor.Name)
	r := Result{Command: "reinit", Member: o.Member, From: donor.Name, Message: "reinit requested"}
	if o.Wait {
		if err := c.waitOutcome(ctx, outcomeWait{kind: dcs.HistoryReinit, member: o.Member, before: before, timeout: o.Timeout,
			doing: "rebuilding", done: "rebuilt", failed: func(reason string) bool { return strings.HasPrefix(reason, "failed") },
			pending: func(cl *dcs.Cluster) bool { return cl.Reinit != nil && cl.Reinit.Member == o.Member }}); err != nil {
			return err
		}
		r.Message = o.Member + " was rebuilt and streams from the leader"
	}
	return c.finish(r)
}

// cancelReinit withdraws the pending request, when it is member's.
func (c *CLI) cancelReinit(ctx context.Context, cl *dcs.Cluster, member string) error {
	if cl.Reinit == nil {
		return fail(ExitRejected, "no reinit request is pending")
	}
	if cl.Reinit.Member != member {
		return fail(ExitRejected, "the pending reinit is of %s, not %s", cl.Reinit.Member, member)
	}
	wctx, wcancel := c.bounded(ctx)
	defer wcancel()
	if err := c.Store.ClearReinit(wctx, cl.Reinit.Version); err != nil {
		return fmt.Errorf("withdrawing the reinit request: %w", err)
	}
	c.say("Reinit of %s withdrawn\n", cl.Reinit.Member)
	return c.finish(Result{Command: "reinit", Member: cl.Reinit.Member, Message: "reinit withdrawn"})
}
