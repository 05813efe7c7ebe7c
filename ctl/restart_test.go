package ctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestRestartValidates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		o    RestartOptions
		code int
		msg  string
	}{
		{"no member", RestartOptions{Force: true}, ExitUsage, "needs the MEMBER"},
		{"unknown member", RestartOptions{Member: "db9", Force: true}, ExitUnknownMember, `unknown member "db9"; members are: db1, db2, db3`},
		{"--to for a replica", RestartOptions{Member: "db2", To: "db3", Force: true}, ExitUsage, "db2 does not lead"},
		{"unknown successor", RestartOptions{Member: "db1", To: "db9", Force: true}, ExitUnknownMember, "unknown member"},
		{"the leader as its own successor", RestartOptions{Member: "db1", To: "db1", Force: true}, ExitUsage, "give another member"},
		{"not confirmed", RestartOptions{Member: "db2"}, ExitAborted, "aborted"},
		{"nothing to cancel", RestartOptions{Member: "db2", Cancel: true}, ExitRejected, "no restart request is pending"},
	} {
		err := f.cli.Restart(ctx, tc.o)
		if ExitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v (exit %d), want exit %d with %q", tc.name, err, ExitCode(err), tc.code, tc.msg)
		}
	}
	cl := mustCluster(t, f)
	if cl.Restart != nil || cl.Switchover != nil {
		t.Fatalf("a refused restart was written: restart %+v, switchover %+v", cl.Restart, cl.Switchover)
	}

	// The leader with no member fit to take over: its restart would stop
	// writes, so it is refused, and so it is in a paused cluster.
	for _, n := range []string{"db2", "db3"} {
		m, _ := cl.Member(n)
		m.NoFailover = true
		if err := f.stores[n].UpdateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	err := f.cli.Restart(ctx, RestartOptions{Member: "db1", Force: true})
	if ExitCode(err) != ExitUnhealthy || !strings.Contains(err.Error(), "no other member can take over") {
		t.Fatalf("leader without a successor: %v", err)
	}
	cfg := cl.Config
	cfg.Paused = true
	if err := f.stores["agentctl"].SetConfig(ctx, cfg, cl.ConfigVersion); err != nil {
		t.Fatal(err)
	}
	err = f.cli.Restart(ctx, RestartOptions{Member: "db1", Force: true})
	if ExitCode(err) != ExitRejected || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("leader of a paused cluster: %v", err)
	}

	// A replica's request is written; a second is refused; only its own
	// member withdraws it.
	if err := f.cli.Restart(ctx, RestartOptions{Member: "db2", Force: true}); err != nil {
		t.Fatal(err)
	}
	if r := mustCluster(t, f).Restart; r == nil || r.Member != "db2" {
		t.Fatalf("request %+v, want db2", r)
	}
	if err := f.cli.Restart(ctx, RestartOptions{Member: "db3", Force: true}); ExitCode(err) != ExitPending || !strings.Contains(err.Error(), "a restart of db2 is already pending") {
		t.Fatalf("second request: %v", err)
	}
	if err := f.cli.Restart(ctx, RestartOptions{Member: "db3", Cancel: true}); ExitCode(err) != ExitRejected {
		t.Fatalf("cancelling another member's request: %v", err)
	}
	if err := f.cli.Restart(ctx, RestartOptions{Member: "db2", Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if r := mustCluster(t, f).Restart; r != nil {
		t.Fatalf("cancelled request still there: %+v", r)
	}

	// A member whose agent is not running cannot restart.
	f.clock.Step(time.Hour)
	if err := f.cli.Restart(ctx, RestartOptions{Member: "db3", Force: true}); ExitCode(err) != ExitUnhealthy || !strings.Contains(err.Error(), "agent is not running") {
		t.Fatalf("stale member: %v", err)
	}
}

// playRestart answers a restart request of member as its agent would:
// records the outcome, clears the request and, on success, streams again.
func playRestart(t *testing.T, f *fixture, member, reason string) {
	ctx := context.Background()
	s := f.stores[member]
	for {
		cl, err := s.Cluster(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if r := cl.Restart; r != nil && r.Member == member {
			m, _ := cl.Member(member)
			m.Role, m.Replication = dcs.RoleReplica, dcs.ReplicationStopped
			s.UpdateMember(ctx, m)
			s.AppendHistory(ctx, dcs.HistoryEntry{Kind: dcs.HistoryRestart, To: member, At: time.Now(), Reason: reason})
			time.Sleep(50 * time.Millisecond)
			s.ClearRestart(ctx, r.Version)
			if reason == "done" {
				m.Replication = dcs.ReplicationRunning
				s.UpdateMember(ctx, m)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRestartWaits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	go playRestart(t, f, "db3", "done")
	if err := f.cli.Restart(ctx, RestartOptions{Member: "db3", Force: true, Wait: true, Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if out := f.out.String(); !strings.Contains(out, "Restart requested: db3") || !strings.Contains(out, "db3 was restarted and streams from the leader") {
		t.Fatalf("output:\n%s", out)
	}

	go playRestart(t, f, "db3", "failed: timed out after 15m0s waiting for mysqld to start again after SHUTDOWN")
	err := f.cli.Restart(ctx, RestartOptions{Member: "db3", Force: true, Wait: true, Timeout: 5 * time.Second})
	if ExitCode(err) != ExitRejected || !strings.Contains(err.Error(), "restarting db3 failed: timed out") {
		t.Fatalf("failed restart: %v", err)
	}

	go playRestart(t, f, "db3", "refused: this member holds the leader lock; agentctl restart switches over first")
	err = f.cli.Restart(ctx, RestartOptions{Member: "db3", Force: true, Wait: true, Timeout: 5 * time.Second})
	if ExitCode(err) != ExitRejected || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("refused restart: %v", err)
	}

	err = f.cli.Restart(ctx, RestartOptions{Member: "db3", Force: true, Wait: true, Timeout: 100 * time.Millisecond})
	if ExitCode(err) != ExitTimeout {
		t.Fatalf("unanswered restart: %v", err)
	}
}

// The leader hands over first; its restart is requested only once another
// member is the primary, and never when the hand-over is refused.
func TestRestartOfTheLeaderSwitchesOverFirst(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		done <- f.cli.Restart(ctx, RestartOptions{Member: "db1", Force: true, Timeout: 5 * time.Second})
	}()
	waitFor(t, func() bool { return mustCluster(t, f).Switchover != nil })
	cl := mustCluster(t, f)
	if sw := cl.Switchover; sw.From != "db1" || sw.To != "" {
		t.Fatalf("switchover request %+v, want from db1 to the best replica", sw)
	}
	if cl.Restart != nil {
		t.Fatalf("restart requested before the hand-over: %+v", cl.Restart)
	}
	f.handOver(t, "db1", "db2")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := mustCluster(t, f).Restart; r == nil || r.Member != "db1" {
		t.Fatalf("restart request %+v after the hand-over, want db1's", r)
	}
	if out := f.out.String(); !strings.Contains(out, "db2 is the primary and accepts writes") || !strings.Contains(out, "Restart requested: db1") {
		t.Fatalf("output:\n%s", out)
	}

	// db2 now leads; it refuses the hand-over: no restart is requested.
	f.stores["agentctl"].ClearRestart(ctx, mustCluster(t, f).Restart.Version)
	go func() {
		done <- f.cli.Restart(ctx, RestartOptions{Member: "db2", To: "db3", Force: true, Timeout: 5 * time.Second})
	}()
	waitFor(t, func() bool { return mustCluster(t, f).Switchover != nil })
	f.stores["db2"].ClearSwitchover(ctx, mustCluster(t, f).Switchover.Version)
	err := <-done
	if ExitCode(err) != ExitRejected || !strings.Contains(err.Error(), "db2's mysqld was not restarted") {
		t.Fatalf("refused hand-over: %v", err)
	}
	if r := mustCluster(t, f).Restart; r != nil {
		t.Fatalf("restart requested although the hand-over was refused: %+v", r)
	}
}
