package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Remove deletes the record of a member that is gone (scaled down), once
// the DCS shows that it is (dcs.Store.DeleteMember judges it by the
// backend's rule). A live member is refused: the lock holder at once, any
// other as soon as its agent rewrites its record while agentctl watches.
// Until either happens Remove watches, at most timeout: a freshly started
// agentctl must see a record stay unchanged for its member ttl (Kubernetes),
// or wait for its session lease to lapse (etcd), before calling it gone.
func (c *CLI) Remove(ctx context.Context, name string, timeout time.Duration) error {
	cl, err := c.cluster(ctx)
	if err != nil {
		return err
	}
	first, known := cl.Member(name)
	if holdsLock(cl, name) {
		return lockHolderRefusal(name)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	waiting := false
	for {
		err := c.deleteMember(ctx, name)
		switch {
		case err == nil:
			c.say("Removed the record of %s.\n", name)
			return c.finish(Result{Command: "remove", Member: name, Message: "removed the record"})
		case errors.Is(err, dcs.ErrNotFound) && !known:
			return unknownMember(cl, name)
		case errors.Is(err, dcs.ErrNotFound):
			c.say("The record of %s is gone: its DCS session ended.\n", name)
			return c.finish(Result{Command: "remove", Member: name, Message: "the record is gone: its DCS session ended"})
		case errors.Is(err, dcs.ErrConflict):
			return liveRefusal(name)
		case !errors.Is(err, dcs.ErrLive):
			return fmt.Errorf("removing %s: %w", name, err)
		}
		if refusal := c.recheckLive(ctx, name, first, known); refusal != nil {
			return refusal
		}
		if !waiting {
			waiting = true
			c.say("%s may still be live (%v).\nWatching its record for up to %v: a running agent rewrites it, a stopped one's lapses.\n",
				name, err, timeout)
		}
		if !c.waitChange(ctx) {
			return fail(ExitTimeout, "%s still counts as live after %v: %v\nIf its agent still runs, stop it (scale the member down) first", name, timeout, err)
		}
	}
}

// deleteMember is one bounded DeleteMember call.
func (c *CLI) deleteMember(ctx context.Context, name string) error {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	return c.Store.DeleteMember(ctx, name)
}

// recheckLive re-reads the cluster while a delete is refused: a member that
// took the lock, or whose record changed since first (when known), is
// live.
func (c *CLI) recheckLive(ctx context.Context, name string, first dcs.Member, known bool) error {
	cl, err := c.read(ctx)
	if err != nil {
		return nil // judged again at the next attempt
	}
	if holdsLock(cl, name) {
		return lockHolderRefusal(name)
	}
	if m, ok := cl.Member(name); known && ok && m.Version != first.Version {
		return liveRefusal(name)
	}
	return nil
}

func holdsLock(cl *dcs.Cluster, name string) bool {
	return cl.Leader != nil && cl.Leader.Holder == name && !cl.Leader.Expired
}

func lockHolderRefusal(name string) error {
	return fail(ExitRejected, "%s holds the leader lock; hand it over first (`agentctl switchover`), stop its agent, then remove it", name)
}

func liveRefusal(name string) error {
	return fail(ExitRejected, "%s is live: its agent rewrote its record while agentctl watched; "+
		"stop its agent (scale the member down) first, then run remove again", name)
}
