package dcstest

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Watch: a store's Changes() fires when another store writes the lock, a
// member record or a request, and coalesces many changes into its one slot.

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

func fired(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(opTimeout):
		t.Fatalf("no change notification after %s", what)
	}
}

func testWatch(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	snapshot(t, a) // synced
	changes := a.Changes()
	drain(changes)
	must(t, "b writes its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RoleReplica}))
	fired(t, changes, "a member record changed")
	waitFor(t, a, "m1's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m1"); return ok })
	drain(changes)
	must(t, "b acquires", b.AcquireLeader(ctxT(t), e.TTL))
	fired(t, changes, "the lock was taken")
	waitFor(t, a, "m1 holds", holderIs("m1"))
	drain(changes)
	must(t, "b renews", b.RenewLeader(ctxT(t), e.TTL))
	must(t, "b requests a switchover", b.RequestSwitchover(ctxT(t), dcs.Switchover{}))
	fired(t, changes, "a switchover was requested")
	// Many changes coalesce into the one-slot buffer without blocking writers.
	for i := 0; i < 5; i++ {
		must(t, "append history", b.AppendHistory(ctxT(t), dcs.HistoryEntry{Kind: dcs.HistoryFailover, To: "m1", At: time.Now()}))
	}
	waitFor(t, a, "5 history entries", func(c *dcs.Cluster) bool { return len(c.History) == 5 })
	if cap(changes) != 1 {
		t.Fatalf("Changes() has capacity %d, want 1", cap(changes))
	}
}
