package agent

import (
	"testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/failover"
)

// A member with a pending rebuild (agentctl reinit) is nobody's successor:
// its data is about to be replaced. A stopping leader hands over past it,
// although it would win among equal histories by name.
func TestLoopShutdownHandsOverPastARebuildingMember(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	ctl, err := h.srv.NewStore(memory.Options{Member: "agentctl", Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.RequestReinit(h.ctx, dcs.Reinit{Member: "db2", Donor: "db3"}); err != nil {
		t.Fatal(err)
	}
	h.agents["db1"].iterate(h.ctx, true)
	if h.holder() != "db3" {
		t.Fatalf("holder after shutdown %q, want db3: db2 is being rebuilt", h.holder())
	}
}

// A rebuild goes on after its request is cleared once past its point of no
// return; the member's record says so, so that every agent and agentctl
// pass it over until it is done.
func TestRebuildingMemberIsTaggedInItsRecord(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	a := h.agents["db2"]
	a.rebuild = &rebuildRun{donor: "db3", done: make(chan struct{})}
	obs, _ := a.observeLocal(h.ctx)
	a.publishMember(h.ctx, nil, obs, nil)
	cl, err := a.store.Cluster(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cl.Member("db2")
	if !failover.FromRecord(m).Rebuilding {
		t.Fatalf("db2's record does not say it is being rebuilt: tags %v", m.Tags)
	}
	a.rebuild = nil
	a.publishMember(h.ctx, nil, obs, nil)
	cl, _ = a.store.Cluster(h.ctx)
	if m, _ := cl.Member("db2"); failover.FromRecord(m).Rebuilding {
		t.Fatalf("db2's record still says it is being rebuilt: tags %v", m.Tags)
	}
}
