// Package dcstest is the contract suite every DCS backend must pass: Run
// drives dcs.Store implementations built by a backend's Factory through the
// lock, expiry, hand-over, identity (member name + agent instance),
// record round-trip, watch and error-mapping rules of the dcs package. Only
// tests import it.
package dcstest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Env is one fresh, empty cluster built by a backend for one subtest.
type Env struct {
	// Stores belong to members "m0", "m1", ... in that order, each with its
	// own agent instance id.
	Stores []dcs.Store
	// Twin returns a new store of Stores[i]'s member with another, fresh,
	// instance id: a second agent started with the same name. Advance moves
	// its clock too. Required: the identity cases fail without it.
	Twin func(i int) dcs.Store
	// TTL is the lock ttl the suite declares.
	TTL time.Duration
	// Advance makes d pass for every store's expiry and staleness rules:
	// steps fake clocks, or sleeps where the server's clock rules (etcd).
	Advance func(d time.Duration)
	// AdvanceMember steps only store i's clock. Nil when expiry is not
	// judged on the member's own clock (etcd).
	AdvanceMember func(i int, d time.Duration)
	// MemberTTL and MemberRefresh are the stores' member record timings.
	MemberTTL, MemberRefresh time.Duration
	// Unreachable returns a store (member "unreachable") of this cluster
	// whose DCS does not answer; nil when the backend cannot simulate it.
	Unreachable func() dcs.Store
	// Crash stops store i as a killed agent would: it writes nothing more
	// and cleans nothing up (an etcd session is neither kept alive nor
	// revoked). Nil when Close already does just that.
	Crash func(i int)
	// Remover returns a new store of this cluster (member "remover") with
	// the credentials of an operator running agentctl, which DeleteMember
	// may need beyond an agent's (Kubernetes: the delete verb). Advance
	// moves its clock. Nil when a member's store will do.
	Remover func() dcs.Store
}

// Factory builds an Env with the given number of members. It registers
// cleanup with t.
type Factory func(t *testing.T, members int) *Env

// Run runs the contract suite.
func Run(t *testing.T, newEnv Factory) {
	t.Run("EmptyCluster", func(t *testing.T) { testEmpty(t, newEnv(t, 1)) })
	t.Run("TwoContendersNeverBothHold", func(t *testing.T) { testExclusive(t, newEnv(t, 2)) })
	t.Run("RaceRounds", func(t *testing.T) { testRaceRounds(t, newEnv(t, 5)) })
	t.Run("RacingHoldersNeverOverlap", func(t *testing.T) { testNeverOverlap(t, newEnv(t, 5)) })
	t.Run("RenewKeepsLock", func(t *testing.T) { testRenewKeeps(t, newEnv(t, 2)) })
	t.Run("ExpiresAfterTTL", func(t *testing.T) { testExpires(t, newEnv(t, 2)) })
	t.Run("ExpiryJudgedByObserverClock", func(t *testing.T) { testObserverClock(t, newEnv(t, 3)) })
	t.Run("StaleHolderLosesLock", func(t *testing.T) { testStaleHolder(t, newEnv(t, 3)) })
	t.Run("HandoverToNamedMember", func(t *testing.T) { testHandover(t, newEnv(t, 3)) })
	t.Run("TakeOverAtTheVersionSeen", func(t *testing.T) { testTakeOver(t, newEnv(t, 3)) })
	t.Run("ReleaseFreesLock", func(t *testing.T) { testRelease(t, newEnv(t, 2)) })
	t.Run("InstanceIDs", func(t *testing.T) { testInstanceIDs(t, newEnv(t, 3)) })
	t.Run("SameNameNeverBothHold", func(t *testing.T) { testSameNameRace(t, newEnv(t, 1)) })
	t.Run("SameNameOtherInstanceHolds", func(t *testing.T) { testSameNameHeld(t, newEnv(t, 2)) })
	t.Run("HandoverToNamedInstance", func(t *testing.T) { testHandoverInstance(t, newEnv(t, 3)) })
	t.Run("MemberRecordNamesInstance", func(t *testing.T) { testMemberInstance(t, newEnv(t, 2)) })
	t.Run("MemberRoundTrip", func(t *testing.T) { testMemberRoundTrip(t, newEnv(t, 2)) })
	t.Run("MemberWriteRate", func(t *testing.T) { testMemberWriteRate(t, newEnv(t, 2)) })
	t.Run("MemberGoesStale", func(t *testing.T) { testMemberStale(t, newEnv(t, 2)) })
	t.Run("ConfigRoundTripAndConflict", func(t *testing.T) { testConfig(t, newEnv(t, 2)) })
	t.Run("ConfigChangeRecordedAtomically", func(t *testing.T) { testChangeConfig(t, newEnv(t, 3)) })
	t.Run("DeleteMemberOnlyWhenGone", func(t *testing.T) { testDeleteMember(t, newEnv(t, 3)) })
	t.Run("SwitchoverRoundTrip", func(t *testing.T) { testSwitchover(t, newEnv(t, 2)) })
	t.Run("ReinitRoundTrip", func(t *testing.T) { testReinit(t, newEnv(t, 2)) })
	t.Run("InitializedOnce", func(t *testing.T) { testInitialized(t, newEnv(t, 2)) })
	t.Run("HistoryBounded", func(t *testing.T) { testHistory(t, newEnv(t, 3)) })
	t.Run("WatchFiresOnChange", func(t *testing.T) { testWatch(t, newEnv(t, 2)) })
	t.Run("InvalidArguments", func(t *testing.T) { testInvalid(t, newEnv(t, 2)) })
	t.Run("ContextErrors", func(t *testing.T) { testContext(t, newEnv(t, 1)) })
	t.Run("Unreachable", func(t *testing.T) { testUnreachable(t, newEnv(t, 1)) })
}

// opTimeout bounds one call; generous so a loaded CI machine does not flake.
const opTimeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

func name(i int) string { return fmt.Sprintf("m%d", i) }

func snapshot(t *testing.T, s dcs.Store) *dcs.Cluster {
	t.Helper()
	c, err := s.Cluster(ctxT(t))
	if err != nil {
		t.Fatalf("%s: Cluster: %v", s.Member(), err)
	}
	return c
}

// waitFor polls s's snapshot until cond holds; snapshots are watch-fed and
// lag writes by the watch latency.
func waitFor(t *testing.T, s dcs.Store, what string, cond func(*dcs.Cluster) bool) *dcs.Cluster {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		c, err := s.Cluster(ctxT(t))
		if err == nil && cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out waiting until %s (last err %v, snapshot %s)", s.Member(), what, err, describe(c))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func describe(c *dcs.Cluster) string {
	if c == nil {
		return "<nil>"
	}
	l := "none"
	if c.Leader != nil {
		l = fmt.Sprintf("%s/%s@%s expired=%v", c.Leader.Holder, c.Leader.Instance, c.Leader.Version, c.Leader.Expired)
	}
	return fmt.Sprintf("{leader %s, %d members, problems %v}", l, len(c.Members), c.Problems)
}

func holderIs(name string) func(*dcs.Cluster) bool {
	return func(c *dcs.Cluster) bool { return c.Leader != nil && c.Leader.Holder == name }
}

// heldBy: s's member and instance hold the lock.
func heldBy(s dcs.Store) func(*dcs.Cluster) bool {
	return func(c *dcs.Cluster) bool {
		return c.Leader != nil && c.Leader.Holder == s.Member() && c.Leader.Instance == s.Instance()
	}
}

func noHolder(c *dcs.Cluster) bool { return c.Leader == nil || c.Leader.Expired }

// agree waits until every store sees holder hold the lock with one and the
// same record version (holder "" waits for no leader).
func agree(t *testing.T, holder string, stores ...dcs.Store) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		versions := map[string]bool{}
		ok := true
		for _, s := range stores {
			c, err := s.Cluster(ctxT(t))
			switch {
			case err != nil:
				ok = false
			case holder == "":
				ok = ok && c.Leader == nil
			case c.Leader == nil || c.Leader.Holder != holder:
				ok = false
			default:
				versions[c.Leader.Version] = true
			}
		}
		if ok && len(versions) <= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stores do not agree that %q holds the lock", holder)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mustIs(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func testEmpty(t *testing.T, e *Env) {
	c := snapshot(t, e.Stores[0])
	if c.Leader != nil || len(c.Members) != 0 || c.Switchover != nil || c.Initialized != nil || len(c.History) != 0 || len(c.Problems) != 0 {
		t.Fatalf("fresh cluster is not empty: %+v", c)
	}
	if c.Config != dcs.DefaultConfig() || c.ConfigVersion != "" {
		t.Fatalf("fresh cluster config = %+v version %q, want defaults and no version", c.Config, c.ConfigVersion)
	}
	if c.Name == "" || c.ReadAt.IsZero() {
		t.Fatalf("snapshot lacks name or read time: %+v", c)
	}
}

func testExclusive(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	// Read-your-writes: the acquirer's next snapshot shows its tenure.
	if c := snapshot(t, a); c.Leader == nil || c.Leader.Holder != "m0" {
		t.Fatalf("a's snapshot right after acquiring: %s", describe(c))
	}
	err := b.AcquireLeader(ctxT(t), e.TTL)
	if !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
		t.Fatalf("b acquires a held lock: got %v, want ErrHeld or ErrConflict", err)
	}
	agree(t, "m0", a, b)
	err = b.AcquireLeader(ctxT(t), e.TTL)
	mustIs(t, "b acquires after seeing a hold it", err, dcs.ErrHeld)
	if !strings.Contains(err.Error(), "m0") {
		t.Errorf("ErrHeld does not name the holder m0: %v", err)
	}
	mustIs(t, "b renews a lock it does not hold", b.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	must(t, "a renews", a.RenewLeader(ctxT(t), e.TTL))
	must(t, "a re-acquires its own lock", a.AcquireLeader(ctxT(t), e.TTL))
	for _, s := range e.Stores {
		waitFor(t, s, "m0 holds", holderIs("m0"))
	}
}

// testRaceRounds: in each round every store races for a free lock at once;
// exactly one wins, and afterwards only the winner can renew.
func testRaceRounds(t *testing.T, e *Env) {
	const rounds = 50
	for r := 0; r < rounds; r++ {
		for _, s := range e.Stores {
			waitFor(t, s, "no leader", func(c *dcs.Cluster) bool { return c.Leader == nil })
		}
		errs := make([]error, len(e.Stores))
		var wg sync.WaitGroup
		for i, s := range e.Stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.AcquireLeader(ctxT(t), e.TTL)
			}()
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both %s and %s acquired the lock", r, name(winner), name(i))
				}
				winner = i
			case errors.Is(err, dcs.ErrHeld), errors.Is(err, dcs.ErrConflict):
			default:
				t.Fatalf("round %d: %s: unexpected error %v", r, name(i), err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody acquired a free lock: %v", r, errs)
		}
		for i, s := range e.Stores {
			err := s.RenewLeader(ctxT(t), e.TTL)
			if i == winner {
				must(t, "winner renews", err)
			} else {
				mustIs(t, "loser renews", err, dcs.ErrNotLeader)
			}
		}
		must(t, "winner releases", e.Stores[winner].ReleaseLeader(ctxT(t)))
	}
}

// testNeverOverlap: stores race continuously for a while; a holder keeps the
// lock for a few renews and releases it. The count of members that believe
// they hold the lock (acquired, not yet released) never exceeds one, and a
// holder's renew never fails.
func testNeverOverlap(t *testing.T, e *Env) {
	var holders atomic.Int32
	var acquisitions atomic.Int32
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errc := make(chan error, len(e.Stores))
	for i, s := range e.Stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				err := s.AcquireLeader(ctx, e.TTL)
				cancel()
				if err != nil {
					if !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
						errc <- fmt.Errorf("%s: acquire: %w", name(i), err)
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				acquisitions.Add(1)
				if n := holders.Add(1); n > 1 {
					errc <- fmt.Errorf("%s acquired while %d members held the lock", name(i), n-1)
					return
				}
				for k := 0; k < 3; k++ {
					ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
					err := s.RenewLeader(ctx, e.TTL)
					cancel()
					if err != nil {
						errc <- fmt.Errorf("%s: holder's renew failed: %w", name(i), err)
						return
					}
				}
				holders.Add(-1)
				ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
				err = s.ReleaseLeader(ctx)
				cancel()
				if err != nil {
					errc <- fmt.Errorf("%s: release: %w", name(i), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if acquisitions.Load() < 2 {
		t.Errorf("only %d acquisitions in 3 s: the race did not exercise hand-offs", acquisitions.Load())
	}
	t.Logf("%d acquisitions", acquisitions.Load())
}

func testRenewKeeps(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	// Renew every ttl/2 for 2 ttl: the lock never lapses.
	for i := 0; i < 4; i++ {
		agree(t, "m0", a, b)
		e.Advance(e.TTL / 2)
		must(t, fmt.Sprintf("renew %d", i), a.RenewLeader(ctxT(t), e.TTL))
		agree(t, "m0", a, b)
		mustIs(t, "b acquires a renewed lock", b.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	}
	c := snapshot(t, b)
	if c.Leader == nil || c.Leader.Holder != "m0" || c.Leader.Expired || c.Leader.TTL != e.TTL {
		t.Fatalf("b sees %+v, want m0 holding, not expired, ttl %v", c.Leader, e.TTL)
	}
}

func testExpires(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	agree(t, "m0", a, b)
	e.Advance(e.TTL / 2)
	mustIs(t, "b acquires at ttl/2", b.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	if e.AdvanceMember != nil {
		// Fake clocks: the boundary is exact.
		e.Advance(e.TTL/2 - time.Nanosecond)
		mustIs(t, "b acquires 1ns before ttl", b.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
		e.Advance(time.Nanosecond)
	} else {
		e.Advance(e.TTL / 2)
	}
	waitFor(t, b, "the lock expired", noHolder)
	must(t, "b acquires an expired lock", b.AcquireLeader(ctxT(t), e.TTL))
	waitFor(t, a, "m1 holds", holderIs("m1"))
}

// testObserverClock: expiry is judged on the observer's clock from when it
// saw the last change, never on the holder's or anybody else's clock.
func testObserverClock(t *testing.T, e *Env) {
	if e.AdvanceMember == nil {
		t.Skip("expiry is judged by the server's lease, not the observer's clock")
	}
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	agree(t, "m0", a, b, c)
	e.AdvanceMember(0, 10*e.TTL) // the holder's clock runs fast: irrelevant
	e.AdvanceMember(2, e.TTL)
	mustIs(t, "b (clock not advanced) acquires", b.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	if cl := snapshot(t, b); cl.Leader == nil || cl.Leader.Expired {
		t.Fatalf("b sees the lock expired on someone else's clock: %+v", cl.Leader)
	}
	if cl := snapshot(t, c); cl.Leader == nil || !cl.Leader.Expired {
		t.Fatalf("c (clock advanced ttl) does not see the lock expired: %+v", cl.Leader)
	}
	must(t, "c acquires", c.AcquireLeader(ctxT(t), e.TTL))
	mustIs(t, "a renews after c took over", a.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
}

func testStaleHolder(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	agree(t, "m0", a, b)
	e.Advance(e.TTL) // a is frozen: no renew
	waitFor(t, b, "the lock expired", noHolder)
	must(t, "b takes over", b.AcquireLeader(ctxT(t), e.TTL))
	err := a.RenewLeader(ctxT(t), e.TTL)
	mustIs(t, "stale holder renews", err, dcs.ErrNotLeader)
	mustIs(t, "stale holder hands over", a.HandoverLeader(ctxT(t), "m2", c.Instance()), dcs.ErrNotLeader)
	mustIs(t, "stale holder releases", a.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
	must(t, "b renews", b.RenewLeader(ctxT(t), e.TTL))
	agree(t, "m1", a, b, c)
	mustIs(t, "stale holder re-acquires", a.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	waitFor(t, c, "m1 holds", holderIs("m1"))
}

func testHandover(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	mustIs(t, "c (not holder) hands over", c.HandoverLeader(ctxT(t), "m1", b.Instance()), dcs.ErrNotLeader)
	mustIs(t, "a hands over to itself", a.HandoverLeader(ctxT(t), "m0", a.Instance()), dcs.ErrInvalid)
	mustIs(t, "a hands over to a bad name", a.HandoverLeader(ctxT(t), "Bad Name", b.Instance()), dcs.ErrInvalid)
	must(t, "a hands over to b", a.HandoverLeader(ctxT(t), "m1", b.Instance()))
	// b renews at once, without waiting to observe the hand-over: the
	// target never has to race.
	must(t, "b renews right after the hand-over", b.RenewLeader(ctxT(t), e.TTL))
	mustIs(t, "a renews after handing over", a.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	mustIs(t, "c renews", c.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	for _, s := range e.Stores {
		waitFor(t, s, "m1 holds", holderIs("m1"))
	}
	mustIs(t, "c acquires", c.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	mustIs(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	// b keeps it by renewing past the original holder's ttl.
	for i := 0; i < 3; i++ {
		e.Advance(e.TTL / 2)
		must(t, "b renews", b.RenewLeader(ctxT(t), e.TTL))
	}
	agree(t, "m1", a, b, c)
	mustIs(t, "c acquires after b renewed", c.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
}

// testTakeOver: a valid lock is replaced in one compare-and-set on the
// version the taker saw; a lock that changed since is not, and the old
// holder can no longer renew.
func testTakeOver(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	seen := waitFor(t, b, "m0 holds", holderIs("m0")).Leader
	mustIs(t, "b takes over a version that never was", b.TakeOverLeader(ctxT(t), "999999", e.TTL), dcs.ErrConflict)
	must(t, "b takes over the lock it saw", b.TakeOverLeader(ctxT(t), seen.Version, e.TTL))
	must(t, "b renews", b.RenewLeader(ctxT(t), e.TTL))
	mustIs(t, "a renews after the take-over", a.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	for _, s := range e.Stores {
		waitFor(t, s, "m1 holds", holderIs("m1"))
	}
	mustIs(t, "c takes over with a's stale version", c.TakeOverLeader(ctxT(t), seen.Version, e.TTL), dcs.ErrConflict)
	mustIs(t, "a re-acquires", a.AcquireLeader(ctxT(t), e.TTL), dcs.ErrHeld)
	mustIs(t, "bad ttl", c.TakeOverLeader(ctxT(t), seen.Version, 0), dcs.ErrInvalid)
}

func testRelease(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	mustIs(t, "release without holding", a.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
	must(t, "a acquires", a.AcquireLeader(ctxT(t), e.TTL))
	mustIs(t, "b releases a's lock", b.ReleaseLeader(ctxT(t)), dcs.ErrNotLeader)
	must(t, "a releases", a.ReleaseLeader(ctxT(t)))
	mustIs(t, "a renews after release", a.RenewLeader(ctxT(t), e.TTL), dcs.ErrNotLeader)
	waitFor(t, b, "no leader", func(c *dcs.Cluster) bool { return c.Leader == nil })
	must(t, "b acquires a released lock at once", b.AcquireLeader(ctxT(t), e.TTL))
}

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

func fullMember(name string) dcs.Member {
	lag := 1500 * time.Millisecond
	return dcs.Member{
		Name: name, Role: dcs.RoleReplica, APIURL: "http://10.0.0.7:8008", MySQLAddr: "10.0.0.7:3306",
		GTIDExecuted:  "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77",
		GTIDRetrieved: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-80",
		Replication:   dcs.ReplicationBroken, ReplicationError: "Error 1062: duplicate key",
		Lag: &lag, NoFailover: true, FailoverPriority: 3,
		Tags:      map[string]string{"zone": "a", "rack": "r1"},
		UpdatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC),
	}
}

// sameMember compares what UpdateMember wrote with what a reader decoded.
func sameMember(got, want dcs.Member) bool {
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		return false
	}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Version, got.ObservedAt, got.Stale = "", time.Time{}, false
	return reflect.DeepEqual(got, want)
}

func testMemberRoundTrip(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	want := fullMember("m0")
	want.Instance = a.Instance() // explicit; an empty one is filled in
	must(t, "update member", a.UpdateMember(ctxT(t), want))
	for _, s := range e.Stores {
		c := waitFor(t, s, "m0's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m0"); return ok })
		got, _ := c.Member("m0")
		if !sameMember(got, want) {
			t.Fatalf("%s reads m0 as\n%+v\nwant\n%+v", s.Member(), got, want)
		}
		if got.Version == "" || got.ObservedAt.IsZero() || got.Stale {
			t.Fatalf("read-side fields not set: %+v", got)
		}
	}
	// A minimal record: name from the store, UpdatedAt from its clock.
	must(t, "update minimal member", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary}))
	c := waitFor(t, a, "m1's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m1"); return ok })
	m1, _ := c.Member("m1")
	if m1.Role != dcs.RolePrimary || m1.UpdatedAt.IsZero() || m1.Lag != nil || len(m1.Tags) != 0 || m1.Instance != b.Instance() {
		t.Fatalf("minimal record read as %+v, want instance %s filled in", m1, b.Instance())
	}
	if len(c.Members) != 2 || c.Members[0].Name != "m0" || c.Members[1].Name != "m1" {
		t.Fatalf("members not sorted by name: %+v", c.Members)
	}
	mustIs(t, "write another member's record", a.UpdateMember(ctxT(t), dcs.Member{Name: "m1"}), dcs.ErrInvalid)
	bad := fullMember("m0")
	bad.APIURL = "not a url"
	mustIs(t, "write an invalid record", a.UpdateMember(ctxT(t), bad), dcs.ErrInvalid)
}

func testMemberWriteRate(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	m := fullMember("m0")
	m.UpdatedAt = time.Time{}
	version := func() string {
		c := snapshot(t, a)
		got, ok := c.Member("m0")
		if !ok {
			t.Fatal("m0's record missing")
		}
		return got.Version
	}
	must(t, "first write", a.UpdateMember(ctxT(t), m))
	waitFor(t, a, "m0's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m0"); return ok })
	v1 := version()
	// Only volatile fields change: no write before the refresh interval.
	m.GTIDExecuted += ",aaaaaaaa-71ca-11e1-9e33-c80aa9429562:1"
	must(t, "volatile update", a.UpdateMember(ctxT(t), m))
	if v := version(); v != v1 {
		t.Fatalf("a GTID-only change was written at once (version %s -> %s)", v1, v)
	}
	// A role change is written at once.
	m.Role = dcs.RolePrimary
	must(t, "role change", a.UpdateMember(ctxT(t), m))
	c := waitFor(t, b, "m0 is primary", func(c *dcs.Cluster) bool { x, _ := c.Member("m0"); return x.Role == dcs.RolePrimary })
	x, _ := c.Member("m0")
	if x.GTIDExecuted != m.GTIDExecuted {
		t.Fatalf("role change did not carry the pending GTID: %q", x.GTIDExecuted)
	}
	// After the refresh interval a volatile change is written.
	e.Advance(e.MemberRefresh)
	m.GTIDExecuted += "-2"
	must(t, "volatile update after refresh", a.UpdateMember(ctxT(t), m))
	waitFor(t, b, "m0's new GTID", func(c *dcs.Cluster) bool { x, _ := c.Member("m0"); return x.GTIDExecuted == m.GTIDExecuted })
}

func testMemberStale(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	must(t, "b writes its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RoleReplica}))
	c := waitFor(t, a, "m1's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m1"); return ok })
	if m, _ := c.Member("m1"); m.Stale {
		t.Fatalf("fresh record reads stale: %+v", m)
	}
	must(t, "b stops", b.Close())
	e.Advance(e.MemberTTL)
	waitFor(t, a, "m1's record gone or stale", func(c *dcs.Cluster) bool {
		m, ok := c.Member("m1")
		return !ok || m.Stale
	})
}

func testConfig(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	cfg := dcs.Config{
		TTL: 10 * time.Second, LoopWait: 2 * time.Second, RetryTimeout: 1500 * time.Millisecond,
		SafetyMargin: 2 * time.Second, MaximumLagOnFailover: 45 * time.Second,
		SemiSync: dcs.SemiSyncStrict, Paused: true, Failsafe: true,
	}
	must(t, "create config", a.SetConfig(ctxT(t), cfg, ""))
	mustIs(t, "create config again", b.SetConfig(ctxT(t), cfg, ""), dcs.ErrConflict)
	c := waitFor(t, b, "config stored", func(c *dcs.Cluster) bool { return c.ConfigVersion != "" })
	if c.Config != cfg {
		t.Fatalf("config read as %+v, want %+v", c.Config, cfg)
	}
	v1 := c.ConfigVersion
	cfg2 := cfg
	cfg2.Paused = false
	must(t, "update config", b.SetConfig(ctxT(t), cfg2, v1))
	mustIs(t, "update with a stale version", a.SetConfig(ctxT(t), cfg, v1), dcs.ErrConflict)
	c = waitFor(t, a, "config updated", func(c *dcs.Cluster) bool { return c.ConfigVersion != v1 && c.ConfigVersion != "" })
	if c.Config != cfg2 {
		t.Fatalf("config read as %+v, want %+v", c.Config, cfg2)
	}
	bad := cfg2
	bad.LoopWait = 9 * time.Second
	err := a.SetConfig(ctxT(t), bad, c.ConfigVersion)
	mustIs(t, "invalid config", err, dcs.ErrInvalid)
	if !strings.Contains(err.Error(), "loop_wait + 2*retry_timeout <= ttl - safety_margin") {
		t.Fatalf("error does not state the timing rule: %v", err)
	}
}

// testChangeConfig: a config change and its history entry land together
// or not at all; a concurrent history append does not make it fail.
func testChangeConfig(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(reason string) dcs.HistoryEntry {
		return dcs.HistoryEntry{Kind: dcs.HistoryConfig, At: at, Reason: reason}
	}
	cfg1 := dcs.DefaultConfig()
	cfg1.TTL = 10 * time.Second
	must(t, "first change", a.ChangeConfig(ctxT(t), cfg1, "", entry("ttl: 5s -> 10s")))
	mustIs(t, "a change on a stale version", b.ChangeConfig(ctxT(t), dcs.DefaultConfig(), "", entry("stale")), dcs.ErrConflict)
	v1 := waitFor(t, b, "the first change", func(c *dcs.Cluster) bool { return c.ConfigVersion != "" && len(c.History) == 1 }).ConfigVersion

	// Another member's failover lands in the history in between: the
	// config's version is unchanged, so the change goes through.
	must(t, "a failover entry", c.AppendHistory(ctxT(t), dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: "m0", To: "m2", At: at}))
	waitFor(t, b, "the failover entry", func(c *dcs.Cluster) bool { return len(c.History) == 2 })
	cfg2 := cfg1
	cfg2.LoopWait, cfg2.SemiSync = 2*time.Second, dcs.SemiSyncOn
	must(t, "second change", b.ChangeConfig(ctxT(t), cfg2, v1, entry("loop_wait: 1s -> 2s, semi_sync: off -> on")))

	bad := cfg2
	bad.LoopWait = bad.TTL
	mustIs(t, "an invalid config", b.ChangeConfig(ctxT(t), bad, v1, entry("x")), dcs.ErrInvalid)
	mustIs(t, "an entry naming members", b.ChangeConfig(ctxT(t), cfg2, v1, dcs.HistoryEntry{Kind: dcs.HistoryConfig, To: "m1", At: at, Reason: "x"}), dcs.ErrInvalid)
	mustIs(t, "an entry without its changes", b.ChangeConfig(ctxT(t), cfg2, v1, entry("")), dcs.ErrInvalid)
	mustIs(t, "a change on the replaced version", a.ChangeConfig(ctxT(t), cfg1, v1, entry("lost")), dcs.ErrConflict)

	got := waitFor(t, a, "the second change", func(c *dcs.Cluster) bool { return c.ConfigVersion != v1 && len(c.History) == 3 })
	if got.Config != cfg2 {
		t.Fatalf("config read as %+v, want %+v", got.Config, cfg2)
	}
	var kinds, reasons []string
	for _, h := range got.History {
		kinds, reasons = append(kinds, h.Kind.String()), append(reasons, h.Reason)
	}
	if strings.Join(kinds, ",") != "config,failover,config" || reasons[2] != "loop_wait: 1s -> 2s, semi_sync: off -> on" || got.History[2].To != "" {
		t.Fatalf("history %v %q, want config, failover, config with the changes as reasons and no members", kinds, reasons)
	}
}

// testDeleteMember: a member's record is deleted only once the member is
// gone by the backend's rule; a live member (fresh record, or the lock
// holder) keeps it.
func testDeleteMember(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	if e.Remover != nil {
		a = e.Remover()
	}
	mustIs(t, "delete without a record", a.DeleteMember(ctxT(t), "m9"), dcs.ErrNotFound)
	mustIs(t, "delete of an invalid name", a.DeleteMember(ctxT(t), "M_1"), dcs.ErrInvalid)
	must(t, "m1 writes its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary}))
	must(t, "m1 takes the lock", b.AcquireLeader(ctxT(t), e.TTL))
	must(t, "m2 writes its record", c.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RoleReplica}))
	waitFor(t, a, "both records and m1's lock", func(cl *dcs.Cluster) bool {
		_, ok1 := cl.Member("m1")
		_, ok2 := cl.Member("m2")
		return ok1 && ok2 && holderIs("m1")(cl)
	})
	mustIs(t, "delete of a fresh record", a.DeleteMember(ctxT(t), "m2"), dcs.ErrLive)
	err := a.DeleteMember(ctxT(t), "m1")
	mustIs(t, "delete of the lock holder", err, dcs.ErrLive)
	if !strings.Contains(err.Error(), "holds the leader lock") {
		t.Fatalf("refusal for the lock holder does not say so: %v", err)
	}

	// m2's agent dies; m1's lives on: it renews, and republishes its record
	// as a running agent does (a non-volatile change writes at once).
	if e.Crash != nil {
		e.Crash(2)
	} else {
		must(t, "m2 stops", c.Close())
	}
	step := min(e.TTL, e.MemberTTL) / 2 // m1 keeps its lock throughout
	for passed := time.Duration(0); passed < e.MemberTTL; passed += step {
		e.Advance(step)
		must(t, "m1 renews", b.RenewLeader(ctxT(t), e.TTL))
	}
	must(t, "m1 rewrites its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary, Tags: map[string]string{"zone": "b"}}))
	waitFor(t, a, "m1's rewritten record", func(cl *dcs.Cluster) bool { m, _ := cl.Member("m1"); return m.Tags["zone"] == "b" })
	mustIs(t, "delete of the live lock holder", a.DeleteMember(ctxT(t), "m1"), dcs.ErrLive)

	// Gone by the backend's rule: the record is deleted now (or, on etcd,
	// vanishes with its session lease).
	deadline := time.Now().Add(opTimeout)
	for {
		err := a.DeleteMember(ctxT(t), "m2")
		if err == nil || errors.Is(err, dcs.ErrNotFound) {
			break
		}
		if !errors.Is(err, dcs.ErrLive) || time.Now().After(deadline) {
			t.Fatalf("delete of a stopped member's record: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range []dcs.Store{a, b} {
		waitFor(t, s, "m2's record gone", func(cl *dcs.Cluster) bool { _, ok := cl.Member("m2"); return !ok })
	}
	mustIs(t, "delete again", a.DeleteMember(ctxT(t), "m2"), dcs.ErrNotFound)
	if _, ok := snapshot(t, a).Member("m1"); !ok {
		t.Fatal("the live member's record went with the stopped one's")
	}
}

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
	must(t, "request reinit", b.RequestReinit(ctxT(t), dcs.Reinit{Member: "m1", Donor: "m0"}))
	mustIs(t, "second request", a.RequestReinit(ctxT(t), dcs.Reinit{Member: "m0"}), dcs.ErrExists)
	must(t, "a switchover beside it", a.RequestSwitchover(ctxT(t), dcs.Switchover{}))
	c := waitFor(t, a, "reinit pending", func(c *dcs.Cluster) bool { return c.Reinit != nil && c.Switchover != nil })
	got := c.Reinit
	if got.Member != "m1" || got.Donor != "m0" || got.RequestedAt.IsZero() || got.Version == "" || got.Err != nil {
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

func testInitialized(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	in := dcs.Initialized{ClusterID: "3e11fa47-71ca-11e1-9e33-c80aa9429562", FirstGTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", Bootstrapper: "m0"}
	must(t, "initialize", a.SetInitialized(ctxT(t), in))
	err := b.SetInitialized(ctxT(t), dcs.Initialized{ClusterID: "other"})
	mustIs(t, "initialize again", err, dcs.ErrExists)
	c := waitFor(t, b, "initialized", func(c *dcs.Cluster) bool { return c.Initialized != nil })
	got := *c.Initialized
	if got.ClusterID != in.ClusterID || got.FirstGTID != in.FirstGTID || got.Bootstrapper != "m0" || got.At.IsZero() || got.Version == "" || got.Err != nil {
		t.Fatalf("initialized read as %+v", got)
	}
	mustIs(t, "initialize without an id", b.SetInitialized(ctxT(t), dcs.Initialized{}), dcs.ErrInvalid)
}

func testHistory(t *testing.T, e *Env) {
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(i int) dcs.HistoryEntry {
		return dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: "m0", To: "m1", At: at.Add(time.Duration(i) * time.Second), Reason: fmt.Sprint(i), WriteUnavailable: time.Duration(i) * time.Millisecond}
	}
	// Concurrent appends from all members all land.
	var wg sync.WaitGroup
	errs := make([]error, len(e.Stores))
	for i, s := range e.Stores {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.AppendHistory(ctxT(t), entry(i)) }()
	}
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("%s appends", name(i)), err)
	}
	c := waitFor(t, e.Stores[0], "3 history entries", func(c *dcs.Cluster) bool { return len(c.History) == len(e.Stores) })
	seen := map[string]bool{}
	for _, h := range c.History {
		seen[h.Reason] = true
	}
	if len(seen) != len(e.Stores) {
		t.Fatalf("concurrent appends lost entries: %+v", c.History)
	}
	sw := dcs.HistoryEntry{Kind: dcs.HistorySwitchover, From: "m1", To: "m2", At: at.Add(time.Hour), Reason: "planned", WriteUnavailable: 1234 * time.Millisecond}
	must(t, "append switchover", e.Stores[1].AppendHistory(ctxT(t), sw))
	c = waitFor(t, e.Stores[2], "switchover in history", func(c *dcs.Cluster) bool { return len(c.History) == len(e.Stores)+1 })
	if got := c.History[len(c.History)-1]; got.Kind != sw.Kind || got.From != sw.From || got.To != sw.To || !got.At.Equal(sw.At) || got.Reason != sw.Reason || got.WriteUnavailable != sw.WriteUnavailable {
		t.Fatalf("newest entry read as %+v, want %+v", got, sw)
	}
	for i := 0; i < dcs.MaxHistory; i++ {
		must(t, "append", e.Stores[0].AppendHistory(ctxT(t), entry(1000+i)))
	}
	c = waitFor(t, e.Stores[1], "history full", func(c *dcs.Cluster) bool {
		return len(c.History) > 0 && c.History[len(c.History)-1].Reason == fmt.Sprint(1000+dcs.MaxHistory-1)
	})
	if len(c.History) != dcs.MaxHistory || c.History[0].Reason != "1000" {
		t.Fatalf("history not bounded to the newest %d: %d entries, oldest %q", dcs.MaxHistory, len(c.History), c.History[0].Reason)
	}
	mustIs(t, "invalid entry", e.Stores[0].AppendHistory(ctxT(t), dcs.HistoryEntry{To: "m1", At: at}), dcs.ErrInvalid)
}

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

func testInvalid(t *testing.T, e *Env) {
	a := e.Stores[0]
	for _, ttl := range []time.Duration{0, -time.Second, 1500 * time.Millisecond, dcs.MaxTTL + time.Second} {
		mustIs(t, fmt.Sprintf("acquire with ttl %v", ttl), a.AcquireLeader(ctxT(t), ttl), dcs.ErrInvalid)
	}
	must(t, "acquire", a.AcquireLeader(ctxT(t), e.TTL))
	mustIs(t, "renew with ttl 0", a.RenewLeader(ctxT(t), 0), dcs.ErrInvalid)
	must(t, "renew", a.RenewLeader(ctxT(t), e.TTL))
}

func testContext(t *testing.T, e *Env) {
	a := e.Stores[0]
	snapshot(t, a)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	calls := map[string]func(ctx context.Context) error{
		"AcquireLeader": func(ctx context.Context) error { return a.AcquireLeader(ctx, e.TTL) },
		"UpdateMember":  func(ctx context.Context) error { return a.UpdateMember(ctx, dcs.Member{}) },
		"SetConfig":     func(ctx context.Context) error { return a.SetConfig(ctx, dcs.DefaultConfig(), "") },
	}
	for n, call := range calls {
		err := call(cancelled)
		if !errors.Is(err, context.Canceled) || errors.Is(err, dcs.ErrUnreachable) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled and not ErrUnreachable", n, err)
		}
		mustIs(t, n+" with an expired deadline", call(expired), dcs.ErrUnreachable)
	}
	c := snapshot(t, a)
	if c.Leader != nil || len(c.Members) != 0 || c.ConfigVersion != "" {
		t.Fatalf("a call with a dead context changed the cluster: %s", describe(c))
	}
}

func testUnreachable(t *testing.T, e *Env) {
	if e.Unreachable == nil {
		t.Skip("backend cannot simulate an unreachable DCS")
	}
	s := e.Unreachable()
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	start := time.Now()
	_, err := s.Cluster(short())
	mustIs(t, "Cluster", err, dcs.ErrUnreachable)
	mustIs(t, "AcquireLeader", s.AcquireLeader(short(), e.TTL), dcs.ErrUnreachable)
	mustIs(t, "RenewLeader", s.RenewLeader(short(), e.TTL), dcs.ErrUnreachable)
	mustIs(t, "UpdateMember", s.UpdateMember(short(), dcs.Member{}), dcs.ErrUnreachable)
	mustIs(t, "SetConfig", s.SetConfig(short(), dcs.DefaultConfig(), ""), dcs.ErrUnreachable)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("calls did not respect their 300ms deadlines: %v for 5 calls", d)
	}
}
