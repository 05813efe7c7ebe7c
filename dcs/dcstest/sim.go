package dcstest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Sim drives stores the way the agent's HA loop does, for benchmarks: every
// LoopWait each member reads its snapshot, renews the lock when it holds it,
// races for it when nobody does, and publishes its record (whose GTID
// changes every iteration, so UpdateMember's rate limit is exercised).
type Sim struct {
	LoopWait     time.Duration
	RetryTimeout time.Duration
	TTL          time.Duration

	mu     sync.Mutex
	renews []time.Duration
	errs   map[string]int
}

// Run runs one member until ctx is done.
func (sim *Sim) Run(ctx context.Context, s dcs.Store) {
	// Members of one cluster do not start in lock-step.
	t := time.NewTimer(rand.N(sim.LoopWait))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(sim.LoopWait)
		sim.iterate(ctx, s, i)
	}
}

func (sim *Sim) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, sim.RetryTimeout)
}

func (sim *Sim) iterate(ctx context.Context, s dcs.Store, i int) {
	cctx, cancel := sim.call(ctx)
	defer cancel()
	c, err := s.Cluster(cctx)
	if err != nil {
		sim.fail("cluster", err)
		return
	}
	role := dcs.RoleReplica
	switch {
	case heldBy(s)(c):
		start := time.Now()
		err := s.RenewLeader(cctx, sim.TTL)
		if err != nil {
			sim.fail("renew", err)
		} else {
			sim.mu.Lock()
			sim.renews = append(sim.renews, time.Since(start))
			sim.mu.Unlock()
			role = dcs.RolePrimary
		}
	case c.Leader == nil || c.Leader.Expired:
		if err := s.AcquireLeader(cctx, sim.TTL); err == nil {
			role = dcs.RolePrimary
		} else if !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
			sim.fail("acquire", err)
		}
	}
	m := dcs.Member{Role: role, Replication: dcs.ReplicationRunning, GTIDExecuted: fmt.Sprintf("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-%d", i+1)}
	if err := s.UpdateMember(cctx, m); err != nil {
		sim.fail("member", err)
	}
}

func (sim *Sim) fail(op string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if sim.errs == nil {
		sim.errs = map[string]int{}
	}
	sim.errs[op+": "+err.Error()]++
}

// Reset forgets the renews and errors so far (the end of a warm-up).
func (sim *Sim) Reset() {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	sim.renews, sim.errs = nil, nil
}

// Renews returns the latencies of successful renews so far and clears them.
func (sim *Sim) Renews() []time.Duration {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	r := sim.renews
	sim.renews = nil
	return r
}

// Errors returns the errors seen, counted by message.
func (sim *Sim) Errors() map[string]int {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	e := make(map[string]int, len(sim.errs))
	for k, v := range sim.errs {
		e[k] = v
	}
	return e
}

// Percentile returns the p-th percentile (0 < p <= 100) of ds, in
// milliseconds, by nearest rank; 0 for no samples.
func Percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(float64(len(s))*p/100+0.999999) - 1
	idx = max(0, min(idx, len(s)-1))
	return float64(s[idx]) / float64(time.Millisecond)
}
