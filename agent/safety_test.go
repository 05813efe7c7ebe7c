package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// These loop tests inject the faults that split brains hide behind: a fence
// that times out, a peer that does not answer, a relay log that never
// applies, a second agent with our name, a DCS write that fails. The
// harness checks after every single iteration that at most one mysqld is
// writable.

// killAgent stops running name's agent (it is no longer stepped) and makes
// its API unreachable; its mysqld keeps running as it was.
func (h *loopHarness) killAgent(name string) {
	h.unreachable[name] = true
	h.names = slices.DeleteFunc(slices.Clone(h.names), func(n string) bool { return n == name })
}

func (h *loopHarness) hasEvent(pod, reason string) bool {
	h.labels.mu.Lock()
	defer h.labels.mu.Unlock()
	return slices.Contains(h.labels.events, pod+":"+reason)
}

func TestLoopPromotionStopsWhileOldSourceCannotBeFenced(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	old := h.mysql.byName("db1")
	// db1's agent dies; its mysqld stays up and writable, and a long
	// statement makes every fence of it time out.
	h.killAgent("db1")
	old.fenceErr = errTimedOut
	h.advance(10*time.Second, "db2", "db3")
	if got := h.holder(); got != "db2" {
		t.Fatalf("holder %q, want db2 holding the lock while it cannot fence db1", got)
	}
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v: the new leader must stay read-only while the old source is writable", w)
	}
	if !h.hasEvent("db2", "FenceFailed") {
		t.Fatalf("no FenceFailed event: %v", h.labels.events)
	}
	// The statement ends: the next attempt fences db1, then promotes.
	old.fenceErr = nil
	h.advance(time.Second, "db2", "db3")
	h.expectPrimary("db2")
	if !old.readOnly {
		t.Fatal("old source not fenced")
	}
}

func TestLoopPromotionStopsWhileAReceiverCannotBeStopped(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.killAgent("db1")
	h.mysql.byName("db1").fenceErr = errTimedOut
	h.mysql.byName("db3").stopIOErr = errTimedOut
	h.advance(8*time.Second, "db2", "db3")
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v: no promotion while db3 may still acknowledge the old source", w)
	}
	h.mysql.byName("db1").fenceErr = nil
	h.mysql.byName("db3").stopIOErr = nil
	h.advance(2*time.Second, "db2", "db3")
	h.expectPrimary("db2")
}

func TestLoopLeaderFencesAWritablePeer(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	// Someone makes a replica writable behind the agents' backs (or a fence
	// failed in an earlier promotion): the leader's next iteration repairs it.
	h.mysql.byName("db3").readOnly = false
	h.step("db1")
	h.expectPrimary("db1")
	if !h.hasEvent("db1", "FencedPeer") {
		t.Fatalf("no FencedPeer event: %v", h.labels.events)
	}
}

func TestLoopUnreachablePeersDoNotBlockPromotion(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	// db1's node dies and db3's mysqld stops answering: both addresses
	// time out (no refusal). db2 promotes, relying on db1's own self-fence.
	h.killAgent("db1")
	h.mysql.byName("db1").up = false
	h.mysql.byName("db1").unreachable = true
	h.mysql.byName("db3").unreachable = true
	h.advance(8*time.Second, "db2")
	if h.holder() != "db2" || !slices.Contains(h.mysql.writable(), "db2") {
		t.Fatalf("holder %q writable %v: db2 should lead and be writable", h.holder(), h.mysql.writable())
	}
	if !h.hasEvent("db2", "UnverifiedFence") {
		t.Fatalf("no UnverifiedFence event: %v", h.labels.events)
	}
}

func TestLoopHolderThatCannotBecomeWritableGivesTheLockUp(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	h.killAgent("db1")
	h.mysql.byName("db1").up = false
	// db2 wins, but its relay log never finishes applying.
	h.mysql.byName("db2").waitErr = errTimedOut
	h.advance(7*time.Second, "db2", "db3")
	if h.holder() != "db2" || len(h.mysql.writable()) != 0 {
		t.Fatalf("holder %q writable %v, want db2 holding the lock, read-only", h.holder(), h.mysql.writable())
	}
	bound := h.agents["db2"].promotionTimeout()
	h.advance(bound, "db2", "db3")
	if h.holder() == "db2" {
		t.Fatalf("db2 still holds the lock %s after it could not become writable", bound)
	}
	h.advance(10*time.Second, "db2", "db3")
	h.expectPrimary("db3")
}

// impostor starts a second agent named name on a mysqld of its own, db4,
// answering at a different API address, and steps it with the others.
func (h *loopHarness) impostor(name string) *Agent {
	h.mysql.mu.Lock()
	addr := "10.0.0.4:3306"
	h.mysql.dbs[addr] = &fakeDB{c: h.mysql, name: "db4", addr: addr, serverID: 4, up: true}
	h.mysql.mu.Unlock()
	a := h.newAgent(name, "db4", "db4", nil)
	h.agents["db4"] = a
	h.names = append(h.names, "db4")
	return a
}

func TestLoopAgentWithALiveLeadersNameRefusesToAct(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	imp := h.impostor("db1")
	h.mysql.write("db1")
	h.advance(10*time.Second, h.names...)
	h.expectPrimary("db1")
	if h.mysql.byName("db4").readOnly == false {
		t.Fatal("the impostor's mysqld is writable")
	}
	if st := imp.Status(); st.Duplicate == "" || st.Role != "none" {
		t.Fatalf("impostor status %+v, want a duplicate identity reported", st)
	}
	if !h.hasEvent("db1", "DuplicateIdentity") { // the impostor's event names the pod it claims
		t.Fatalf("no DuplicateIdentity event: %v", h.labels.events)
	}
	// The real member's record is still its own.
	cl, _ := h.agents["db2"].store.Cluster(h.ctx)
	if m, _ := cl.Member("db1"); m.Instance != h.agents["db1"].instance || m.MySQLAddr != h.mysql.byName("db1").addr {
		t.Fatalf("db1's record %+v was overwritten by the impostor", m)
	}
	if cl.Leader == nil || cl.Leader.Instance != h.agents["db1"].instance {
		t.Fatalf("lock %+v, want it held by the real db1", cl.Leader)
	}
}

func TestLoopAgentWithAReplicasNameRefusesToAct(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	imp := h.impostor("db2")
	// Even when the real leader dies, the impostor never takes part.
	h.advance(3*time.Second, h.names...)
	h.killAgent("db1")
	h.mysql.byName("db1").up = false
	h.advance(10*time.Second, h.names...)
	h.expectPrimary("db2")
	if imp.Status().Duplicate == "" || !h.mysql.byName("db4").readOnly {
		t.Fatal("the impostor acted")
	}
	cl, _ := h.agents["db3"].store.Cluster(h.ctx)
	if cl.Leader.Instance != h.agents["db2"].instance {
		t.Fatal("the lock went to the impostor")
	}
}

func TestLoopRestartedAgentIsNotItsOwnDuplicate(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.startAgent("db2") // same API address: the old record is its predecessor's
	h.round()
	if st := h.agents["db2"].Status(); st.Duplicate != "" {
		t.Fatalf("restarted agent reports a duplicate: %s", st.Duplicate)
	}
	h.expectReplicaOf("db2", "db1")
}

func TestLoopBootstrapCrashAfterTakingTheLockIsRepaired(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	// db1 takes the lock, then "crashes" before recording anything: the
	// same process carries on (a restart would wait out the lock).
	if !h.agents["db1"].acquire(h.ctx) {
		t.Fatal("acquire")
	}
	h.round()
	h.round()
	h.expectPrimary("db1")
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	if cl.Initialized == nil || cl.ConfigVersion == "" {
		t.Fatalf("initialized %+v config version %q: the bootstrap was not completed", cl.Initialized, cl.ConfigVersion)
	}
}

// failingConfigStore fails SetConfig while err is set.
type failingConfigStore struct {
	Store
	err *error
}

func (s failingConfigStore) SetConfig(ctx context.Context, cfg dcs.Config, v string) error {
	if *s.err != nil {
		return *s.err
	}
	return s.Store.SetConfig(ctx, cfg, v)
}

func TestLoopBootstrapWaitsForItsConfigToBeStored(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	err := errors.New("etcdserver: request timed out")
	h.agents["db1"] = h.newAgent("db1", "db1", "db1", func(s Store) Store { return failingConfigStore{s, &err} })
	h.agents["db1"].self.Bootstrap.SemiSync = dcs.SemiSyncStrict
	h.names = []string{"db1"}
	h.advance(5*time.Second, "db1")
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("writable %v although the cluster config could not be stored", w)
	}
	err = nil
	h.advance(2*time.Second, "db1")
	h.expectPrimary("db1")
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	if cl.Config.SemiSync != dcs.SemiSyncStrict {
		t.Fatalf("stored semi-sync %v, want strict from the bootstrap config", cl.Config.SemiSync)
	}
}

func TestLoopRefuseReasonNamesTheOtherInstance(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	imp := h.impostor("db3")
	h.step("db4")
	if st := imp.Status(); !strings.Contains(st.Duplicate, h.agents["db3"].instance) {
		t.Fatalf("duplicate %q does not name the live instance %s", st.Duplicate, h.agents["db3"].instance)
	}
}

func TestLoopFollowerDoesNotRestartAReceiverAtOnce(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	// A promoting candidate stopped db3's receiver; db3's view of the lock
	// may be the stale one, so it waits a loop_wait before restarting it.
	h.mysql.byName("db3").ioRunning = false
	h.step("db3")
	if h.mysql.byName("db3").ioRunning {
		t.Fatal("receiver restarted at once")
	}
	h.clock.Step(time.Second)
	h.step("db3")
	if !h.mysql.byName("db3").ioRunning {
		t.Fatal("receiver not restarted after a loop_wait")
	}
}

// A pod replaced after a graceful stop (a rolling update) comes back at a
// new address while its predecessor's record is still fresh: the record
// says the agent stopped, so the new agent acts at once rather than wait
// it out as a duplicate's (an agent that died leaves no such word:
// TestLoopAgentWithAReplicasNameRefusesToAct).
func TestLoopSuccessorOfAStoppedAgentActsAtOnce(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.agents["db2"].shutdown()
	h.unreachable["db2"] = true // the old pod's address answers no more
	h.agents["db2"] = h.newAgent("db2", "db2", "db2-new", nil)
	h.round()
	if st := h.agents["db2"].Status(); st.Duplicate != "" {
		t.Fatalf("the successor of a stopped agent refuses to act: %s", st.Duplicate)
	}
	h.expectReplicaOf("db2", "db1")
}

// A stopping leader whose best replica does not catch up in time (a pod
// restarted a moment ago, still applying) hands over to the next best
// rather than release the lock into a failover.
func TestLoopStoppingLeaderTriesTheNextTarget(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	h.mysql.byName("db2").waitErr = errTimedOut // ranks first (by name), never catches up
	h.agents["db1"].shutdown()
	if got := h.holder(); got != "db3" {
		t.Fatalf("lock held by %q after the stop, want db3 (handed over after db2 failed)", got)
	}
	h.killAgent("db1")
	h.advance(3*time.Second, "db2", "db3")
	h.expectPrimary("db3")
}
