package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/failover"
)

// gatedRenewStore holds every lock renewal at a gate while one is set, and
// fails it while err is set.
type gatedRenewStore struct {
	Store
	mu      sync.Mutex
	entered chan struct{} // closed when a renewal reaches the gate
	release chan struct{} // closing it lets the renewal through
	err     error
}

func (s *gatedRenewStore) RenewLeader(ctx context.Context, ttl time.Duration) error {
	s.mu.Lock()
	entered, release, err := s.entered, s.release, s.err
	s.entered = nil
	s.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	if err != nil {
		return err
	}
	return s.Store.RenewLeader(ctx, ttl)
}

// arm makes the next renewal wait at the gate.
func (s *gatedRenewStore) arm() (entered, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entered, s.release = make(chan struct{}), make(chan struct{})
	return s.entered, s.release
}

func (s *gatedRenewStore) failWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// handOverTo builds a new agent for target whose renewals go through a
// gate, and has db1 hand the lock over to it.
func handOverTo(t *testing.T, h *loopHarness, target string) *gatedRenewStore {
	t.Helper()
	var gate *gatedRenewStore
	h.agents[target] = h.newAgent(target, target, target, func(s Store) Store {
		gate = &gatedRenewStore{Store: s}
		return gate
	})
	h.round() // publishes the new agent's instance, which the hand-over names
	if err := h.agents["db2"].store.(*memory.Store).RequestSwitchover(h.ctx, dcs.Switchover{To: target}); err != nil {
		t.Fatal(err)
	}
	h.step("db1")
	if h.holder() != target {
		t.Fatalf("holder %q after the hand-over, want %s", h.holder(), target)
	}
	return gate
}

// TestLoopHandedLockPromotesWhileRenewing: the target of a hand-over runs
// its promotion's steps while its first renewal is in flight, so that a
// slow DCS write does not add to the switchover's write gap; it becomes
// writable only once that renewal has returned.
func TestLoopHandedLockPromotesWhileRenewing(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	gate := handOverTo(t, h, "db3")
	entered, release := gate.arm()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for redo, i := true, 0; redo && i < maxRedo; i++ {
			redo = h.agents["db3"].iterate(h.ctx, false)
		}
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("db3 did not renew the lock handed to it")
	}
	db3 := h.mysql.byName("db3")
	replicating := func() (source string, readOnly bool) {
		db3.c.mu.Lock()
		defer db3.c.mu.Unlock()
		return db3.source, db3.readOnly
	}
	deadline := time.Now().Add(5 * time.Second)
	for src, _ := replicating(); src != ""; src, _ = replicating() {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("db3's promotion waited for its renewal: replication still configured while the renewal was in flight")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // room for a premature unfence
	if _, ro := replicating(); !ro {
		close(release)
		t.Fatal("db3 became writable before the renewal of the lock handed to it returned")
	}
	close(release)
	<-done
	h.round()
	h.expectPrimary("db3")
	if db3.seq() != 1 {
		t.Fatal("the new primary lacks the old primary's write")
	}
}

// TestLoopHandedLockNotWritableWhileItsRenewalFails: a hand-over target
// whose renewals fail stays read-only, and promotes once one succeeds.
func TestLoopHandedLockNotWritableWhileItsRenewalFails(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	gate := handOverTo(t, h, "db3")
	gate.failWith(errors.New("the server was unable to return a response in the time allotted"))
	for range 3 {
		h.step("db3")
		if w := h.mysql.writable(); len(w) != 0 {
			t.Fatalf("writable %v while the new holder's renewals fail", w)
		}
		h.clock.Step(time.Second)
	}
	gate.failWith(nil)
	h.step("db3")
	h.expectPrimary("db3")
}

// TestLoopHandedLockSeesThePeersBeforeUnfencing: the target of a hand-over
// probes its peers before its first renewal, as any promoting holder does:
// a peer found writable is fenced before the target unfences.
func TestLoopHandedLockSeesThePeersBeforeUnfencing(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	handOverTo(t, h, "db3")
	h.mysql.byName("db2").readOnly = false // an operator's SET GLOBAL read_only = OFF
	h.step("db3")                          // fails on two writable servers
	h.expectPrimary("db3")
}

// renewalsFailAfter lets the next n lock renewals through once armed, and
// fails every later one as a lock another member took would.
type renewalsFailAfter struct {
	Store
	mu    sync.Mutex
	armed bool
	left  int
}

func (s *renewalsFailAfter) RenewLeader(ctx context.Context, ttl time.Duration) error {
	s.mu.Lock()
	fail := s.armed && s.left == 0
	if s.armed && s.left > 0 {
		s.left--
	}
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("renewing: %w", dcs.ErrNotLeader)
	}
	return s.Store.RenewLeader(ctx, ttl)
}

func (s *renewalsFailAfter) arm(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.left = true, n
}

// lagBehindDB1 stops db3's applier and commits n transactions on db1, then
// asks db1 to switch over to db3.
func lagBehindDB1(t *testing.T, h *loopHarness, n int) {
	t.Helper()
	db3 := h.mysql.byName("db3")
	h.mysql.mu.Lock()
	db3.applyStopped = true
	h.mysql.mu.Unlock()
	for range n {
		if !h.mysql.write("db1") {
			t.Fatal("db1 took no write")
		}
	}
	if err := h.agents["db2"].store.(*memory.Store).RequestSwitchover(h.ctx, dcs.Switchover{From: "db1", To: "db3"}); err != nil {
		t.Fatal(err)
	}
}

// lastHistory is the newest history entry.
func lastHistory(t *testing.T, h *loopHarness) (dcs.HistoryEntry, *dcs.Cluster) {
	t.Helper()
	cl, err := h.agents["db2"].store.Cluster(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.History) == 0 {
		t.Fatal("no history")
	}
	return cl.History[len(cl.History)-1], cl
}

// TestLoopSwitchoverToFarBehindTargetNeverFences: a target that has not
// applied more than failover.SwitchoverMaxBehind of the primary's
// transactions is refused while the primary is still writable: it never
// fences (no write outage), and the refusal is recorded in the history,
// with the reason, before the request is cleared, and as an Event.
func TestLoopSwitchoverToFarBehindTargetNeverFences(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	lagBehindDB1(t, h, failover.SwitchoverMaxBehind+1)
	db1 := h.mysql.byName("db1")
	fencesBefore := db1.fences()
	h.step("db1")
	if db1.fences() != fencesBefore {
		t.Fatalf("db1 fenced itself %d times for a switchover to a target %d transactions behind", db1.fences()-fencesBefore, failover.SwitchoverMaxBehind+1)
	}
	h.expectPrimary("db1")
	e, cl := lastHistory(t, h)
	if cl.Switchover != nil {
		t.Fatalf("switchover request %+v still pending", cl.Switchover)
	}
	if e.Kind != dcs.HistorySwitchoverRejected || e.From != "db1" || e.To != "db3" ||
		!strings.Contains(e.Reason, "1001") || !strings.Contains(e.Reason, "--allow-lag") {
		t.Fatalf("last history entry %+v, want the refusal naming db3, how far behind and --allow-lag", e)
	}
	if !slices.Contains(h.labels.events, "db1:SwitchoverRejected") {
		t.Fatalf("events %v lack db1's SwitchoverRejected", h.labels.events)
	}
}

// TestLoopAbandonedHandoverUnfencesAtOnceWhileTheLockIsOurs: a target
// close enough to try, that does not catch up, abandons the hand-over; the
// old primary is writable again within the same iteration, since a renewal
// proved the lock is still its own.
func TestLoopAbandonedHandoverUnfencesAtOnceWhileTheLockIsOurs(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	lagBehindDB1(t, h, 10)
	db1 := h.mysql.byName("db1")
	fencesBefore := db1.fences()
	h.agents["db1"].iterate(h.ctx, false) // one iteration: no second one to repair it
	if db1.fences() == fencesBefore {
		t.Fatal("db1 did not even stop writes for a target 10 transactions behind")
	}
	h.expectPrimary("db1")
	if e, _ := lastHistory(t, h); e.Kind != dcs.HistorySwitchoverRejected || !strings.Contains(e.Reason, "did not catch up") {
		t.Fatalf("last history entry %+v, want the abandoned switchover", e)
	}
}

// TestLoopAbandonedHandoverStaysFencedWhenTheLockIsLost: an abandoned
// hand-over whose renewal finds the lock gone leaves the old primary
// read-only: it never becomes writable again without the lock.
func TestLoopAbandonedHandoverStaysFencedWhenTheLockIsLost(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	var renewals *renewalsFailAfter
	h.agents["db1"] = h.newAgent("db1", "db1", "db1", func(s Store) Store {
		renewals = &renewalsFailAfter{Store: s}
		return renewals
	})
	h.bootstrap()
	lagBehindDB1(t, h, 10)
	renewals.arm(1) // the hand-over's own renewal, then none
	h.step("db1")
	if !h.mysql.byName("db1").isReadOnly() {
		t.Fatal("db1 became writable again after an abandoned hand-over although its lock could not be renewed")
	}
}
