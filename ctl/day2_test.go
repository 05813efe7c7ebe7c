package ctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// switchover --at stores the time the leader may start; status shows it;
// --cancel withdraws it; a second cancel, and a time in the past, fail.
func TestScheduledSwitchoverAndCancel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	if err := f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true, At: at}); err != nil {
		t.Fatal(err)
	}
	if want := "Switchover requested: db1 -> db2 at " + at.Format(time.RFC3339); !strings.Contains(f.out.String(), want) {
		t.Errorf("output %q lacks %q", f.out.String(), want)
	}
	cl, err := f.stores["db1"].Cluster(ctx)
	if err != nil || cl.Switchover == nil || !cl.Switchover.ScheduledAt.Equal(at) || cl.Switchover.To != "db2" {
		t.Fatalf("stored request %+v (%v), want one to db2 scheduled at %s", cl.Switchover, err, at)
	}
	f.out.Reset()
	if err := f.cli.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
	if want := "Pending switchover: from db1 to db2, scheduled at " + at.Format(time.RFC3339); !strings.Contains(f.out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, f.out.String())
	}
	err = f.cli.Switchover(ctx, SwitchoverOptions{To: "db3", Force: true})
	exitCode(t, err, ExitPending)
	if !strings.Contains(err.Error(), "scheduled at") || !strings.Contains(err.Error(), "--cancel") {
		t.Errorf("second request: %v, want the pending one described and --cancel named", err)
	}

	f.out.Reset()
	if err := f.cli.Switchover(ctx, SwitchoverOptions{Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "Cancelled the pending switchover (from db1 to db2, scheduled at") {
		t.Errorf("cancel said %q", f.out.String())
	}
	if cl, _ := f.stores["db1"].Cluster(ctx); cl.Switchover != nil {
		t.Fatalf("request still pending after --cancel: %+v", cl.Switchover)
	}
	err = f.cli.Switchover(ctx, SwitchoverOptions{Cancel: true})
	exitCode(t, err, ExitRejected)
	if !strings.Contains(err.Error(), "nothing to cancel") {
		t.Errorf("cancel with nothing pending: %v", err)
	}
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true, At: time.Now().Add(-time.Minute)}), ExitUsage)
	if cl, _ := f.stores["db1"].Cluster(ctx); cl.Switchover != nil {
		t.Fatalf("a switchover in the past was stored: %+v", cl.Switchover)
	}
}

// pause --wait returns once every running agent's record says it has seen
// the pause; a stopped agent is not waited for; an agent that never shows
// it (an older one) makes it time out, naming it.
func TestPauseWaitsForTheAgents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tag := func(name string, tags map[string]string) {
		t.Helper()
		cl, err := f.stores[name].Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := cl.Member(name)
		m.Tags = tags
		if err := f.stores[name].UpdateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	tag("db3", map[string]string{failover.TagStopped: "agent stopped"})
	done := make(chan error, 1)
	go func() { done <- f.cli.SetPaused(ctx, true, true, 10*time.Second) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("pause --wait returned before any agent showed the pause: %v", err)
	default:
	}
	tag("db1", map[string]string{failover.TagPaused: "yes"})
	tag("db2", map[string]string{failover.TagPaused: "yes"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := f.out.String(); !strings.Contains(out, "Every running agent has seen the pause") || !strings.Contains(out, "not waited for: db3") {
		t.Errorf("pause --wait said %q", out)
	}

	if err := f.cli.SetPaused(ctx, false, false, 0); err != nil {
		t.Fatal(err)
	}
	tag("db2", nil)
	err := f.cli.SetPaused(ctx, true, true, 100*time.Millisecond)
	exitCode(t, err, ExitTimeout)
	if !strings.Contains(err.Error(), "the agents of db2 have not shown the pause") {
		t.Errorf("timeout: %v", err)
	}
	if cl, _ := f.stores["db1"].Cluster(ctx); !cl.Config.Paused {
		t.Error("the pause was not stored")
	}
}

// status -o wide shows where each member is reached, its agent's version
// and its record's time, uncut.
func TestStatusWide(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("x", 80)
	cl, _ := f.stores["db2"].Cluster(context.Background())
	m, _ := cl.Member("db2")
	m.Replication, m.ReplicationError, m.AgentVersion = dcs.ReplicationBroken, long, "v1.2.3"
	if err := f.stores["db2"].UpdateMember(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := f.cli.Status(context.Background(), Wide, false); err != nil {
		t.Fatal(err)
	}
	out := f.out.String()
	for _, want := range []string{"MYSQL", "API", "VERSION", "UPDATED", "db2:3306", "http://db2:8008", "v1.2.3", "broken: " + long} {
		if !strings.Contains(out, want) {
			t.Errorf("-o wide lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cut to fit") {
		t.Errorf("-o wide cut a cell:\n%s", out)
	}
}

// fence stores the member in the config's fenced list; status shows it; a
// switchover to it is refused; the leader needs --force; unfence lifts it.
func TestFenceAndUnfence(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.SetFenced(ctx, true, FenceOptions{Member: "db2"}); err != nil {
		t.Fatal(err)
	}
	cl, _ := f.stores["db1"].Cluster(ctx)
	if cl.Config.Fenced != "db2" {
		t.Fatalf("stored fenced %q, want db2", cl.Config.Fenced)
	}
	f.out.Reset()
	if err := f.cli.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "FENCED") {
		t.Errorf("status does not show the fence:\n%s", f.out.String())
	}
	err := f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true})
	exitCode(t, err, ExitUnhealthy)
	if !strings.Contains(err.Error(), "fenced") {
		t.Errorf("switchover to a fenced member: %v", err)
	}
	err = f.cli.SetFenced(ctx, true, FenceOptions{Member: "db1"})
	exitCode(t, err, ExitRejected)
	if !strings.Contains(err.Error(), "agentctl switchover") {
		t.Errorf("fencing the leader without --force: %v", err)
	}
	if err := f.cli.SetFenced(ctx, true, FenceOptions{Member: "db1", Force: true}); err != nil {
		t.Fatal(err)
	}
	exitCode(t, f.cli.SetFenced(ctx, true, FenceOptions{Member: "db9"}), ExitUnknownMember)
	for _, m := range []string{"db1", "db2"} {
		if err := f.cli.SetFenced(ctx, false, FenceOptions{Member: m}); err != nil {
			t.Fatal(err)
		}
	}
	if cl, _ := f.stores["db1"].Cluster(ctx); cl.Config.Fenced != "" {
		t.Fatalf("fenced %q after unfencing both", cl.Config.Fenced)
	}
	if cl, _ := f.stores["db1"].Cluster(ctx); len(cl.History) < 4 {
		t.Errorf("history %d entries, want a config entry per change", len(cl.History))
	}
}
