package dcstest

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mysqlha/mysqlha/dcs"
)

// Identity: a member is its name plus its agent instance id; two agents
// started with one name never both hold the lock.

// twin is e.Twin(i), checked.
func twin(t *testing.T, e *Env, i int) dcs.Store {
	t.Helper()
	if e.Twin == nil {
		t.Fatal("the backend's Env has no Twin: the identity cases (two agents started with one name) cannot run")
	}
	s := e.Twin(i)
	if s.Member() != name(i) || s.Instance() == e.Stores[i].Instance() {
		t.Fatalf("Twin(%d) is member %s instance %s, want member %s with an instance other than %s",
			i, s.Member(), s.Instance(), name(i), e.Stores[i].Instance())
	}
	return s
}

// testInstanceIDs: every store has a valid instance id of its own.
func testInstanceIDs(t *testing.T, e *Env) {
	seen := map[string]string{}
	for i, s := range append(append([]dcs.Store(nil), e.Stores...), twin(t, e, 0)) {
		id := s.Instance()
		if err := dcs.ValidateInstance(id); err != nil {
			t.Fatalf("store %d (%s): %v", i, s.Member(), err)
		}
		if other, dup := seen[id]; dup {
			t.Fatalf("stores of %s and %s share instance id %s", other, s.Member(), id)
		}
		seen[id] = s.Member()
	}
}

// testSameNameRace: two agents started with one name race for the lock as
// two members do; exactly one holds it, and the other can neither renew,
// release nor re-acquire it.
func testSameNameRace(t *testing.T, e *Env) {
	const rounds = 20
	stores := []dcs.Store{e.Stores[0], twin(t, e, 0)}
	for r := 0; r < rounds; r++ {
		for _, s := range stores {
			waitFor(t, s, "no leader", func(c *dcs.Cluster) bool { return c.Leader == nil })
		}
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.AcquireLeader(ctxT(t), e.TTL)
			}()
		}
		wg.Wait()
		var winner, loser dcs.Store
		for i, err := range errs {
			switch {
			case err == nil:
				if winner != nil {
					t.Fatalf("round %d: both instances of m0 (%s and %s) acquired the lock", r, winner.Instance(), stores[i].Instance())
				}
				winner = stores[i]
			case errors.Is(err, dcs.ErrHeld), errors.Is(err, dcs.ErrConflict):
				loser = stores[i]
			default:
				t.Fatalf("round %d: instance %s: unexpected error %v", r, stores[i].Instance(), err)
			}
		}
		if winner == nil {
			t.Fatalf("round %d: nobody acquired a free lock: %v", r, errs)
		}
		mustIs(t, "the losing instance renews", loser.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
		mustIs(t, "the losing instance releases", loser.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
		if err := loser.AcquireLeader(ctxT(t), e.TTL); !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
			t.Fatalf("round %d: the losing instance acquires again: %v, want ErrHeld or ErrConflict", r, err)
		}
		must(t, "the winning instance renews", winner.RenewLeader(ctxT(t), e.TTL))
		for _, s := range stores {
			waitFor(t, s, "the winner's instance holds", heldBy(winner))
		}
		must(t, "winner releases", winner.ReleaseLeader(ctxT(t)))
	}
}

// testSameNameHeld: while one agent of m0 holds the lock, another agent
// started as m0 finds it held by someone else; once the holder stops
// renewing and the lock expires, the other may take it, and the old holder
// has lost it.
func testSameNameHeld(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	a2 := twin(t, e, 0)
	all := []dcs.Store{a, a2, b}
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	waitFor(t, a2, "a holds", heldBy(a))
	err := a2.AcquireLeader(ctxT(t), e.TTL)
	mustIs(t, "a2 (same name) acquires while a holds", err, dcs.ErrHeld)
	if !strings.Contains(err.Error(), a.Instance()) || !strings.Contains(err.Error(), "two agents may be running with one name") {
		t.Errorf("ErrHeld does not name the other instance %s and say what it means: %v", a.Instance(), err)
	}
	mustIs(t, "a2 renews", a2.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	mustIs(t, "a2 hands over", a2.HandoverLeader(ctxT(t), "m1", b.Instance()), dcs.ErrNotLeader)
	mustIs(t, "a2 releases", a2.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
	must(t, "a renews (a2's attempts changed nothing)", a.RenewLeader(ctxT(t), e.TTL))
	agree(t, "m0", all...) // everybody observed the renew before the clocks move
	for _, s := range all {
		c := waitFor(t, s, "a's instance holds", heldBy(a))
		if c.Leader.Expired {
			t.Fatalf("%s: a's renewed lock reads expired: %s", s.Member(), describe(c))
		}
	}

	e.Advance(e.TTL) // a is frozen: no renew
	waitFor(t, a2, "the lock expired", noHolder)
	must(t, "a2 takes over the expired lock", a2.AcquireLeader(ctxT(t), e.TTL))
	mustIs(t, "a renews after a2 took over", a.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	mustIs(t, "a hands over after a2 took over", a.HandoverLeader(ctxT(t), "m1", b.Instance()), dcs.ErrNotLeader)
	mustIs(t, "a releases after a2 took over", a.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
	for _, s := range all {
		waitFor(t, s, "a2's instance holds", heldBy(a2))
	}
	err = a.AcquireLeader(ctxT(t), e.TTL)
	mustIs(t, "a re-acquires", err, dcs.ErrHeld)
	if !strings.Contains(err.Error(), a2.Instance()) {
		t.Errorf("ErrHeld does not name the other instance %s: %v", a2.Instance(), err)
	}
	must(t, "a2 renews", a2.RenewLeader(ctxT(t), e.TTL))
}

// testHandoverInstance: a hand-over names the target's instance; only that
// agent may renew, not another agent started with the target's name, even
// before either has observed the hand-over.
func testHandoverInstance(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	b2 := twin(t, e, 1)
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	mustIs(t, "hand over without an instance", a.HandoverLeader(ctxT(t), "m1", ""), dcs.ErrInvalid)
	mustIs(t, "hand over to a malformed instance", a.HandoverLeader(ctxT(t), "m1", "Not/An-Id"), dcs.ErrInvalid)
	mustIs(t, "hand over to an overlong instance", a.HandoverLeader(ctxT(t), "m1", strings.Repeat("a", dcs.MaxInstanceLen+1)), dcs.ErrInvalid)
	must(t, "a renews (the refused hand-overs changed nothing)", a.RenewLeader(ctxT(t), e.TTL))
	must(t, "a hands over to m1's second instance", a.HandoverLeader(ctxT(t), "m1", b2.Instance()))
	mustIs(t, "b (m1, another instance) renews at once", b.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	must(t, "b2 renews at once", b2.RenewLeader(ctxT(t), e.TTL))
	mustIs(t, "b renews after b2 did", b.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	mustIs(t, "b releases", b.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
	mustIs(t, "b hands over", b.HandoverLeader(ctxT(t), "m2", c.Instance()), dcs.ErrNotLeader)
	mustIs(t, "a renews after handing over", a.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	for _, s := range []dcs.Store{a, b, c, b2} {
		waitFor(t, s, "b2's instance holds", heldBy(b2))
	}
	mustIs(t, "b acquires", b.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	// The adopted tenure is a full one: b2 can hand it on.
	must(t, "b2 hands over to c", b2.HandoverLeader(ctxT(t), "m2", c.Instance()))
	must(t, "c renews", c.RenewLeader(ctxT(t), e.TTL))
	mustIs(t, "b2 renews after handing over", b2.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	waitFor(t, a, "c holds", heldBy(c))
}

// testMemberInstance: a member record names the instance that wrote it. A
// store writes only its own instance, but does not arbitrate between two
// agents of one name: the agents see each other through the record.
func testMemberInstance(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	a2 := twin(t, e, 0)
	must(t, "a writes its record", a.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RoleReplica}))
	cl := waitFor(t, b, "m0's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m0"); return ok })
	if m, _ := cl.Member("m0"); m.Instance != a.Instance() {
		t.Fatalf("m0's record names instance %q, want the writer's %s", m.Instance, a.Instance())
	}
	mustIs(t, "a writes a record of another instance", a.UpdateMember(ctxT(t), dcs.Member{Instance: a2.Instance()}), dcs.ErrInvalid)
	mustIs(t, "a writes a malformed instance", a.UpdateMember(ctxT(t), dcs.Member{Instance: "Not/An-Id"}), dcs.ErrInvalid)
	must(t, "a2 writes m0's record", a2.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary}))
	waitFor(t, b, "m0's record by a2", func(c *dcs.Cluster) bool {
		m, ok := c.Member("m0")
		return ok && m.Instance == a2.Instance() && m.Role == dcs.RolePrimary
	})
}
