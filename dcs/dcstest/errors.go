package dcstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Error mapping: invalid arguments, cancelled or expired contexts, and an
// unreachable DCS.

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
	if err != nil && strings.Contains(err.Error(), "<nil>") {
		t.Errorf("Cluster's error names no cause: %v", err)
	}
	mustIs(t, "AcquireLeader", s.AcquireLeader(short(), e.TTL), dcs.ErrUnreachable)
	mustIs(t, "RenewLeader", s.RenewLeader(short(), e.TTL), dcs.ErrUnreachable)
	mustIs(t, "UpdateMember", s.UpdateMember(short(), dcs.Member{}), dcs.ErrUnreachable)
	mustIs(t, "SetConfig", s.SetConfig(short(), dcs.DefaultConfig(), ""), dcs.ErrUnreachable)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("calls did not respect their 300ms deadlines: %v for 5 calls", d)
	}
}
