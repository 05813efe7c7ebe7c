package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/dcstest"
	"github.com/mysqlha/mysqlha/dcs/memory"
)

const (
	memberTTL     = 30 * time.Second
	memberRefresh = 10 * time.Second
)

// env builds n stores with a fake clock each.
func env(t *testing.T, n int) (*memory.Server, *dcstest.Env, []*clocktesting.FakeClock) {
	srv := memory.NewServer("c1")
	e := &dcstest.Env{TTL: 5 * time.Second, MemberTTL: memberTTL, MemberRefresh: memberRefresh}
	var clocks []*clocktesting.FakeClock
	newStore := func(name string) *memory.Store {
		c := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		clocks = append(clocks, c)
		s, err := srv.NewStore(memory.Options{Member: name, Clock: c, MemberTTL: memberTTL, MemberRefresh: memberRefresh})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	for i := 0; i < n; i++ {
		e.Stores = append(e.Stores, newStore(fmt.Sprintf("m%d", i)))
	}
	e.Advance = func(d time.Duration) {
		for _, c := range clocks {
			c.Step(d)
		}
	}
	e.AdvanceMember = func(i int, d time.Duration) { clocks[i].Step(d) }
	e.Twin = func(i int) dcs.Store { return newStore(fmt.Sprintf("m%d", i)) }
	e.Unreachable = func() dcs.Store {
		srv.Partition("unreachable")
		return newStore("unreachable")
	}
	return srv, e, clocks
}

func TestContract(t *testing.T) {
	dcstest.Run(t, func(t *testing.T, n int) *dcstest.Env {
		_, e, _ := env(t, n)
		return e
	})
}

func TestPartitionAndHeal(t *testing.T) {
	srv, e, _ := env(t, 2)
	ctx := context.Background()
	a, b := e.Stores[0], e.Stores[1]
	if err := a.AcquireLeader(ctx, e.TTL); err != nil {
		t.Fatal(err)
	}
	srv.Partition("m0")
	if err := a.RenewLeader(ctx, e.TTL); !errors.Is(err, dcs.ErrUnreachable) {
		t.Fatalf("partitioned renew: %v, want ErrUnreachable", err)
	}
	// The partitioned member keeps its last snapshot.
	c, err := a.Cluster(ctx)
	if err != nil || c.Leader == nil || c.Leader.Holder != "m0" {
		t.Fatalf("partitioned snapshot: %+v, %v", c, err)
	}
	e.Advance(e.TTL)
	if err := b.AcquireLeader(ctx, e.TTL); err != nil {
		t.Fatalf("b takes over from a partitioned holder: %v", err)
	}
	if c, _ := a.Cluster(ctx); c.Leader.Holder != "m0" {
		t.Fatalf("partitioned member saw a change: %+v", c.Leader)
	}
	srv.Heal("m0")
	if c, _ := a.Cluster(ctx); c.Leader == nil || c.Leader.Holder != "m1" || c.Leader.Expired {
		t.Fatalf("healed member does not see m1 holding: %+v", c.Leader)
	}
	if err := a.RenewLeader(ctx, e.TTL); !errors.Is(err, dcs.ErrNotLeader) {
		t.Fatalf("healed stale holder renews: %v, want ErrNotLeader", err)
	}
	if srv.Holder() != "m1" {
		t.Fatalf("Holder() = %q", srv.Holder())
	}
}

func TestExpireLeader(t *testing.T) {
	srv, e, _ := env(t, 2)
	ctx := context.Background()
	a, b := e.Stores[0], e.Stores[1]
	if err := a.AcquireLeader(ctx, e.TTL); err != nil {
		t.Fatal(err)
	}
	changes := b.Changes()
	<-changes
	srv.ExpireLeader()
	select {
	case <-changes:
	default:
		t.Fatal("ExpireLeader did not notify")
	}
	if err := a.RenewLeader(ctx, e.TTL); !errors.Is(err, dcs.ErrNotLeader) {
		t.Fatalf("renew after ExpireLeader: %v, want ErrNotLeader", err)
	}
	if err := b.AcquireLeader(ctx, e.TTL); err != nil {
		t.Fatalf("acquire after ExpireLeader without advancing clocks: %v", err)
	}
	c, _ := b.Cluster(ctx)
	if c.Leader.Transitions != 1 {
		t.Fatalf("transitions = %d, want 1 (m0 acquiring a fresh lock is not a transition)", c.Leader.Transitions)
	}
}

func TestNewStoreRejectsBadOptions(t *testing.T) {
	srv := memory.NewServer("c1")
	for _, o := range []memory.Options{
		{Member: ""},
		{Member: "UPPER"},
		{Member: "a", MemberTTL: 5 * time.Second, MemberRefresh: 10 * time.Second},
		{Member: "a", MemberTTL: 1500 * time.Millisecond},
		{Member: "a", Instance: "UPPER"},
		{Member: "a", Instance: "a/b"},
		{Member: "a", Instance: strings.Repeat("a", dcs.MaxInstanceLen+1)},
	} {
		if _, err := srv.NewStore(o); !errors.Is(err, dcs.ErrInvalid) {
			t.Errorf("NewStore(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	s, err := srv.NewStore(memory.Options{Member: "a", Instance: "given-1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Instance() != "given-1" {
		t.Fatalf("NewStore with instance given-1: Instance() = %q", s.Instance())
	}
}
