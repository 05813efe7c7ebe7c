package ctl

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/testenv/syncbuf"
)

// startRemove runs Remove in the background once agentctl watches: it
// returns the channel of its result after the output says it is watching.
func startRemove(t *testing.T, f *fixture, name string, timeout time.Duration) (<-chan error, *syncbuf.Buffer) {
	t.Helper()
	out := &syncbuf.Buffer{}
	f.cli.Out = out
	done := make(chan error, 1)
	go func() { done <- f.cli.Remove(context.Background(), name, timeout) }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "Watching its record") })
	return done, out
}

func TestRemoveRefusesLiveMembers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	exitCode(t, f.cli.Remove(ctx, "db9", time.Second), ExitUnknownMember)
	err := f.cli.Remove(ctx, "db1", time.Minute)
	exitCode(t, err, ExitRejected) // at once: it holds the lock
	if !strings.Contains(err.Error(), "db1 holds the leader lock; hand it over first") {
		t.Fatalf("lock holder: %v", err)
	}

	// db2's agent runs: it rewrites its record while agentctl watches.
	done, _ := startRemove(t, f, "db2", time.Minute)
	rec, _ := mustCluster(t, f).Member("db2")
	rec.Tags = map[string]string{"zone": "b"}
	if err := f.stores["db2"].UpdateMember(ctx, rec); err != nil {
		t.Fatal(err)
	}
	err = <-done
	exitCode(t, err, ExitRejected)
	if !strings.Contains(err.Error(), "db2 is live: its agent rewrote its record while agentctl watched; stop its agent") {
		t.Fatalf("live member: %v", err)
	}

	// Not proven gone before the timeout: neither removed nor refused.
	err = f.cli.Remove(ctx, "db3", 50*time.Millisecond)
	exitCode(t, err, ExitTimeout)
	if !strings.Contains(err.Error(), "db3 still counts as live after 50ms") || !strings.Contains(err.Error(), "member ttl 30s") {
		t.Fatalf("timeout: %v", err)
	}
	for _, n := range []string{"db1", "db2", "db3"} {
		if _, ok := mustCluster(t, f).Member(n); !ok {
			t.Fatalf("the record of %s went although it was refused", n)
		}
	}
}

func TestRemoveDeletesAStoppedMember(t *testing.T) {
	f := newFixture(t)
	// db3's agent stopped: its record stays unchanged while agentctl
	// watches it for a member ttl.
	done, out := startRemove(t, f, "db3", time.Minute)
	f.clock.Step(dcs.DefaultMemberTTL)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Removed the record of db3.") {
		t.Fatalf("output:\n%s", out)
	}
	cl := mustCluster(t, f)
	if _, ok := cl.Member("db3"); ok || len(cl.Members) != 2 {
		t.Fatalf("members after the removal: %+v", cl.Members)
	}
	exitCode(t, f.cli.Remove(context.Background(), "db3", time.Second), ExitUnknownMember)
}

// A record that vanishes while agentctl watches (an etcd session lease
// lapsing, or another agentctl) counts as removed.
func TestRemoveRecordVanishes(t *testing.T) {
	f := newFixture(t)
	done, out := startRemove(t, f, "db3", time.Minute)
	clk := clocktesting.NewFakeClock(time.Now())
	other, err := f.srv.NewStore(memory.Options{Member: "agentctl", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	clk.Step(dcs.DefaultMemberTTL)
	if err := other.DeleteMember(context.Background(), "db3"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "The record of db3 is gone") {
		t.Fatalf("output:\n%s", out)
	}
}
