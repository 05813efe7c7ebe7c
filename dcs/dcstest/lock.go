package dcstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// The leader lock: exclusivity under races, renewal, expiry on the
// observer's clock, a stale holder, hand-over, take-over and release.

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
