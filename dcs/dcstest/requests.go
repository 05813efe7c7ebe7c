package dcstest

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Requests the agents act on: switchover, reinit and restart records.

func testSwitchover(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	sw := dcs.Switchover{From: "m0", To: "m1", ScheduledAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Force: true}
	must(t, "request switchover", b.RequestSwitchover(ctxT(t), sw))
	mustIs(t, "second request", a.RequestSwitchover(ctxT(t), dcs.Switchover{}), dcs.ErrExists)
	c := waitFor(t, a, "switchover pending", func(c *dcs.Cluster) bool { return c.Switchover != nil })
	got := c.Switchover
	if got.From != "m0" || got.To != "m1" || !got.ScheduledAt.Equal(sw.ScheduledAt) || !got.Force || got.RequestedAt.IsZero() || got.Version == "" || got.Err != nil {
		t.Fatalf("switchover read as %+v", got)
	}
	mustIs(t, "clear with a wrong version", a.ClearSwitchover(ctxT(t), got.Version+"0"), dcs.ErrConflict)
	must(t, "clear", a.ClearSwitchover(ctxT(t), got.Version))
	mustIs(t, "clear again", a.ClearSwitchover(ctxT(t), got.Version), dcs.ErrNotFound)
	waitFor(t, b, "switchover cleared", func(c *dcs.Cluster) bool { return c.Switchover == nil })
	mustIs(t, "invalid request", a.RequestSwitchover(ctxT(t), dcs.Switchover{To: "m0", From: "m0"}), dcs.ErrInvalid)
	must(t, "request to anyone", a.RequestSwitchover(ctxT(t), dcs.Switchover{}))
	c = waitFor(t, b, "switchover pending", func(c *dcs.Cluster) bool { return c.Switchover != nil })
	if c.Switchover.From != "" || c.Switchover.To != "" || !c.Switchover.ScheduledAt.IsZero() || c.Switchover.Force {
		t.Fatalf("open switchover read as %+v", c.Switchover)
	}
}

// testReinit: a reinit request is stored once, read back by every store,
// cleared only at its version, and independent of a switchover request.
func testReinit(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	must(t, "request reinit", b.RequestReinit(ctxT(t), dcs.Reinit{Member: "m1", Donor: "m0", Reason: "automatic rebuild from m0: diverged"}))
	mustIs(t, "second request", a.RequestReinit(ctxT(t), dcs.Reinit{Member: "m0"}), dcs.ErrExists)
	must(t, "a switchover beside it", a.RequestSwitchover(ctxT(t), dcs.Switchover{}))
	c := waitFor(t, a, "reinit pending", func(c *dcs.Cluster) bool { return c.Reinit != nil && c.Switchover != nil })
	got := c.Reinit
	if got.Member != "m1" || got.Donor != "m0" || got.Reason != "automatic rebuild from m0: diverged" || got.RequestedAt.IsZero() ||
		got.Version == "" || got.Err != nil {
		t.Fatalf("reinit read as %+v", got)
	}
	must(t, "clear the switchover", a.ClearSwitchover(ctxT(t), c.Switchover.Version))
	mustIs(t, "clear with a wrong version", a.ClearReinit(ctxT(t), got.Version+"0"), dcs.ErrConflict)
	must(t, "clear", a.ClearReinit(ctxT(t), got.Version))
	mustIs(t, "clear again", a.ClearReinit(ctxT(t), got.Version), dcs.ErrNotFound)
	waitFor(t, b, "reinit cleared", func(c *dcs.Cluster) bool { return c.Reinit == nil })
	mustIs(t, "no member", a.RequestReinit(ctxT(t), dcs.Reinit{}), dcs.ErrInvalid)
	mustIs(t, "donor is the member", a.RequestReinit(ctxT(t), dcs.Reinit{Member: "m0", Donor: "m0"}), dcs.ErrInvalid)
	must(t, "request with any donor", a.RequestReinit(ctxT(t), dcs.Reinit{Member: "m0"}))
	c = waitFor(t, b, "reinit pending", func(c *dcs.Cluster) bool { return c.Reinit != nil })
	if c.Reinit.Member != "m0" || c.Reinit.Donor != "" {
		t.Fatalf("reinit with any donor read as %+v", c.Reinit)
	}
	e2 := dcs.HistoryEntry{Kind: dcs.HistoryReinit, From: "m1", To: "m0", At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Reason: "done"}
	must(t, "record the reinit", a.AppendHistory(ctxT(t), e2))
	c = waitFor(t, b, "reinit in history", func(c *dcs.Cluster) bool { return len(c.History) > 0 })
	if h := c.History[len(c.History)-1]; h.Kind != dcs.HistoryReinit || h.From != "m1" || h.To != "m0" || h.Reason != "done" {
		t.Fatalf("reinit history entry read as %+v", h)
	}
}

// testRestart: a restart request is stored once, read back by every store,
// cleared only at its version, independent of a reinit request, and
// recorded in the history under its own kind.
func testRestart(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, "request restart", b.RequestRestart(ctxT(t), dcs.Restart{Member: "m1", RequestedAt: at}))
	mustIs(t, "second request", a.RequestRestart(ctxT(t), dcs.Restart{Member: "m0"}), dcs.ErrExists)
	must(t, "a reinit beside it", a.RequestReinit(ctxT(t), dcs.Reinit{Member: "m0"}))
	c := waitFor(t, a, "restart pending", func(c *dcs.Cluster) bool { return c.Restart != nil && c.Reinit != nil })
	got := c.Restart
	if got.Member != "m1" || !got.RequestedAt.Equal(at) || got.Version == "" || got.Err != nil || !c.RestartPending("m1") || c.RestartPending("m0") {
		t.Fatalf("restart read as %+v", got)
	}
	must(t, "clear the reinit", a.ClearReinit(ctxT(t), c.Reinit.Version))
	mustIs(t, "clear with a wrong version", a.ClearRestart(ctxT(t), got.Version+"0"), dcs.ErrConflict)
	must(t, "clear", a.ClearRestart(ctxT(t), got.Version))
	mustIs(t, "clear again", a.ClearRestart(ctxT(t), got.Version), dcs.ErrNotFound)
	waitFor(t, b, "restart cleared", func(c *dcs.Cluster) bool { return c.Restart == nil })
	mustIs(t, "no member", a.RequestRestart(ctxT(t), dcs.Restart{}), dcs.ErrInvalid)
	must(t, "request stamped by the writer", a.RequestRestart(ctxT(t), dcs.Restart{Member: "m0"}))
	c = waitFor(t, b, "restart pending", func(c *dcs.Cluster) bool { return c.Restart != nil })
	if c.Restart.Member != "m0" || c.Restart.RequestedAt.IsZero() {
		t.Fatalf("restart stamped by the writer read as %+v", c.Restart)
	}
	h := dcs.HistoryEntry{Kind: dcs.HistoryRestart, To: "m0", At: at, Reason: "done"}
	must(t, "record the restart", a.AppendHistory(ctxT(t), h))
	c = waitFor(t, b, "restart in history", func(c *dcs.Cluster) bool { return len(c.History) > 0 })
	if last := c.History[len(c.History)-1]; last.Kind != dcs.HistoryRestart || last.To != "m0" || last.Reason != "done" {
		t.Fatalf("restart history entry read as %+v", last)
	}
}
