package dcstest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Helpers shared by the cases: bounded contexts, snapshots, waiting for a
// condition, and the agreement check on the lock holder.

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
