package ctl

import (
	"context"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// A member's agent carries out reinit and restart requests and records the
// outcome in the history before it clears the request; --wait reads it
// there.

// lastOutcome is the newest history entry of kind about member; zero if
// none.
func lastOutcome(cl *dcs.Cluster, kind dcs.HistoryKind, member string) dcs.HistoryEntry {
	var last dcs.HistoryEntry
	for _, e := range cl.History {
		if e.Kind == kind && e.To == member {
			last = e
		}
	}
	return last
}

// outcomeWait describes the wait for one request's outcome.
type outcomeWait struct {
	kind   dcs.HistoryKind
	member string
	// before is the newest entry of kind about member when the request was
	// made; only a newer one is the outcome.
	before  dcs.HistoryEntry
	timeout time.Duration
	// doing and done name the work in messages ("rebuilding", "rebuilt").
	doing, done string
	// failed tells a failure from the entry's reason.
	failed func(reason string) bool
	// pending reports whether the request is still stored.
	pending func(cl *dcs.Cluster) bool
}

// waitOutcome waits for the agent's outcome in the history, then, on
// success, for the member to stream from the leader.
func (c *CLI) waitOutcome(ctx context.Context, w outcomeWait) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	start := time.Now()
	done := false
	for {
		cl, err := c.Store.Cluster(ctx)
		if err == nil {
			pending := w.pending(cl)
			if e := lastOutcome(cl, w.kind, w.member); !done && e.At.After(w.before.At) {
				failed := w.failed(e.Reason)
				// A failure is reported once the agent has also cleared the
				// request, so that a retry is not refused as still pending.
				if failed && !pending {
					return fail(ExitRejected, "%s %s %s; see its agent's log and Events", w.doing, w.member, e.Reason)
				}
				done = !failed
			}
			if m, ok := cl.Member(w.member); done && ok && !m.Stale && m.Role == dcs.RoleReplica && m.Replication == dcs.ReplicationRunning {
				c.say("%s was %s and streams from the leader (after %s)\n", w.member, w.done, time.Since(start).Round(time.Millisecond))
				return nil
			}
			if !done && !pending {
				// The agent records the outcome before it clears the request.
				return fail(ExitRejected, "the %s request of %s was withdrawn", w.kind, w.member)
			}
		}
		if !c.waitChange(ctx) {
			return fail(ExitTimeout, "timed out after %s waiting for %s to be %s", w.timeout, w.member, w.done)
		}
	}
}
