package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
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
	if db3.seq != 1 {
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
