package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// FenceOptions are the flags of `agentctl fence` and `unfence`.
type FenceOptions struct {
	Member string
	// Force fences the leader: writes stop now, and another member takes
	// over as in a failover.
	Force bool
}

// SetFenced fences a member (on) or lifts its fence, in the cluster config:
// a fenced member's agent keeps its mysqld read-only and it never leads,
// until unfenced; no agent lifts it. Fencing the leader needs Force, since
// it stops the cluster's writes until another member takes over; a
// switchover first avoids that.
func (c *CLI) SetFenced(ctx context.Context, on bool, o FenceOptions) error {
	verb := "fence"
	if !on {
		verb = "unfence"
	}
	for {
		cl, err := c.cluster(ctx)
		if err != nil {
			return err
		}
		if _, ok := cl.Member(o.Member); !ok && on {
			return unknownMember(cl, o.Member)
		}
		if cl.Config.IsFenced(o.Member) == on {
			if on {
				c.say("%s is fenced already.\n", o.Member)
			} else {
				c.say("%s is not fenced.\n", o.Member)
			}
			return c.finish(Result{Command: verb, Member: o.Member, Message: "nothing to change"})
		}
		leads := cl.Leader != nil && !cl.Leader.Expired && cl.Leader.Holder == o.Member
		if on && leads && !o.Force {
			return fail(ExitRejected, "%s is the leader: fencing it stops every write until another member takes over; "+
				"run `agentctl switchover` first, or give --force", o.Member)
		}
		cfg := cl.Config.WithFenced(o.Member, on)
		// A config change like any other: in the history, with its reason.
		e := dcs.HistoryEntry{Kind: dcs.HistoryConfig, At: time.Now(), Reason: verb + " " + o.Member + ": " +
			changeReason(cl.Config.Changes(cfg), false)}
		wctx, wcancel := c.bounded(ctx)
		err = c.Store.ChangeConfig(wctx, cfg, cl.ConfigVersion, e)
		wcancel()
		if errors.Is(err, dcs.ErrConflict) {
			continue // someone else changed the config; re-read and retry
		}
		if err != nil {
			return fmt.Errorf("writing the cluster config: %w", err)
		}
		msg := o.Member + " is fenced: its agent keeps it read-only and it never leads, until `agentctl unfence " + o.Member + "`"
		switch {
		case on && leads:
			msg += "; it gives up the lock now, and another member takes over"
		case !on:
			msg = o.Member + " is unfenced: it may lead again; it stays a read-only replica until it does"
		}
		c.say("%s.\n", msg)
		return c.finish(Result{Command: verb, Member: o.Member, Message: msg})
	}
}
