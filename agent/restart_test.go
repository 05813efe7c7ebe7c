package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/failover"
)

// requestRestart writes a restart request of member, as agentctl does.
func (h *loopHarness) requestRestart(member string) {
	h.t.Helper()
	ctl, err := h.srv.NewStore(memory.Options{Member: "agentctl", Clock: h.clock})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := ctl.RequestRestart(h.ctx, dcs.Restart{Member: member}); err != nil {
		h.t.Fatal(err)
	}
}

// lastRestart is the newest restart history entry and whether a restart
// request is still pending.
func (h *loopHarness) lastRestart() (dcs.HistoryEntry, bool) {
	h.t.Helper()
	cl, err := h.agents[h.names[0]].store.Cluster(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var last dcs.HistoryEntry
	for _, e := range cl.History {
		if e.Kind == dcs.HistoryRestart {
			last = e
		}
	}
	return last, cl.Restart != nil
}

// A member whose mysqld is about to be restarted is nobody's successor,
// although it would win among equal histories by name.
func TestLoopShutdownHandsOverPastARestartingMember(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.requestRestart("db2")
	h.agents["db1"].iterate(h.ctx, true)
	if h.holder() != "db3" {
		t.Fatalf("holder after shutdown %q, want db3: db2 is about to restart its mysqld", h.holder())
	}
}

// The holder's mysqld is never restarted in place, even when a request
// names it (agentctl switches over first; the request raced a failover
// back): the agent refuses, records why, clears the request, and keeps
// leading with a writable server.
func TestLoopLeaderRefusesARestart(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.requestRestart("db1")
	h.round()
	h.round()
	e, pending := h.lastRestart()
	if pending || e.To != "db1" || !strings.HasPrefix(e.Reason, "refused: this member holds the leader lock") {
		t.Fatalf("after a restart request of the leader: pending %v, history %+v; want it refused and cleared", pending, e)
	}
	h.expectPrimary("db1")
	if !h.hasEvent("db1", "RestartFailed") {
		t.Fatalf("no RestartFailed Event; events %v", h.labels.events)
	}
}

// A restart that cannot be done (here the agent cannot see mysqld's pid
// file, so it could not tell when mysqld stopped) leaves mysqld running,
// is reported once with its cause, and is cleared: the member follows
// the leader again rather than retrying for ever. While it runs, the
// member's record says it is restarting.
func TestLoopFailedRestartIsReportedAndCleared(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.requestRestart("db2")
	a := h.agents["db2"]
	a.iterate(h.ctx, false)
	run := a.restarting
	if run == nil {
		t.Fatal("db2 did not start its restart")
	}
	if m := h.record("db2"); !failover.FromRecord(m).Restarting {
		t.Fatalf("db2's record does not say it is restarting: tags %v", m.Tags)
	}
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the restart did not end")
	}
	a.iterate(h.ctx, false)
	e, pending := h.lastRestart()
	if pending || e.To != "db2" || !strings.Contains(e.Reason, "failed: mysqld's pid file") {
		t.Fatalf("after a restart that cannot be done: pending %v, history %+v; want it reported and cleared", pending, e)
	}
	h.round()
	h.expectReplicaOf("db2", "db1")
	if m := h.record("db2"); failover.FromRecord(m).Restarting {
		t.Fatalf("db2's record still says it is restarting: tags %v", m.Tags)
	}
}
