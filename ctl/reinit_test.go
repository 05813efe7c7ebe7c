package ctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestReinitValidates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		o    ReinitOptions
		code int
		msg  string
	}{
		{"no member", ReinitOptions{Force: true}, ExitUsage, "needs the MEMBER"},
		{"unknown member", ReinitOptions{Member: "db9", Force: true}, ExitUnknownMember, "unknown member"},
		{"the leader", ReinitOptions{Member: "db1", Force: true}, ExitRejected, "switch over first"},
		{"unknown donor", ReinitOptions{Member: "db3", From: "db9", Force: true}, ExitUnknownMember, "unknown member"},
		{"itself as donor", ReinitOptions{Member: "db3", From: "db3", Force: true}, ExitUnhealthy, "own donor"},
		{"not confirmed", ReinitOptions{Member: "db3"}, ExitAborted, "aborted"},
	} {
		err := f.cli.Reinit(ctx, tc.o)
		if ExitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v (exit %d), want exit %d with %q", tc.name, err, ExitCode(err), tc.code, tc.msg)
		}
	}
	if cl, _ := f.stores["agentctl"].Cluster(ctx); cl.Reinit != nil {
		t.Fatalf("a refused reinit was written: %+v", cl.Reinit)
	}
	// A broken donor is refused by name.
	m, _ := mustCluster(t, f).Member("db2")
	m.Replication = dcs.ReplicationBroken
	if err := f.stores["db2"].UpdateMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := f.cli.Reinit(ctx, ReinitOptions{Member: "db3", From: "db2", Force: true}); ExitCode(err) != ExitUnhealthy {
		t.Fatalf("broken donor: %v", err)
	}
	// Without a streaming replica, the leader is the donor.
	if err := f.cli.Reinit(ctx, ReinitOptions{Member: "db3", Force: true}); err != nil {
		t.Fatal(err)
	}
	if r := mustCluster(t, f).Reinit; r == nil || r.Member != "db3" || r.Donor != "db1" {
		t.Fatalf("request %+v, want db3 from db1", r)
	}
	if err := f.cli.Reinit(ctx, ReinitOptions{Member: "db2", Force: true}); ExitCode(err) != ExitPending {
		t.Fatalf("second request: %v", err)
	}
	if err := f.cli.Reinit(ctx, ReinitOptions{Member: "db2", Cancel: true}); ExitCode(err) != ExitRejected {
		t.Fatalf("cancelling another member's request: %v", err)
	}
	if err := f.cli.Reinit(ctx, ReinitOptions{Member: "db3", Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if r := mustCluster(t, f).Reinit; r != nil {
		t.Fatalf("cancelled request still there: %+v", r)
	}
}

// playAgent answers db3's reinit request as its agent would: records the
// outcome, clears the request and, on success, streams again.
func playAgent(t *testing.T, f *fixture, reason string) {
	ctx := context.Background()
	s := f.stores["db3"]
	for {
		cl, err := s.Cluster(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if cl.Reinit != nil {
			m, _ := cl.Member("db3")
			m.Replication = dcs.ReplicationStopped
			s.UpdateMember(ctx, m)
			s.AppendHistory(ctx, dcs.HistoryEntry{Kind: dcs.HistoryReinit, From: cl.Reinit.Donor, To: "db3", At: time.Now(), Reason: reason})
			// The agent's two writes are apart; a CLI that reports the
			// outcome in between leaves a retry refused as pending.
			time.Sleep(50 * time.Millisecond)
			s.ClearReinit(ctx, cl.Reinit.Version)
			if reason == "done" {
				m.Replication = dcs.ReplicationRunning
				m.GTIDExecuted = "0-1-100"
				s.UpdateMember(ctx, m)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReinitWaits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	go playAgent(t, f, "done")
	if err := f.cli.Reinit(ctx, ReinitOptions{Member: "db3", Force: true, Wait: true, Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if out := f.out.String(); !strings.Contains(out, "Reinit requested: db3 from db2") || !strings.Contains(out, "db3 was rebuilt and streams from the leader") {
		t.Fatalf("output:\n%s", out)
	}

	go playAgent(t, f, "failed: fetching backup from donor db2: connection refused")
	err := f.cli.Reinit(ctx, ReinitOptions{Member: "db3", Force: true, Wait: true, Timeout: 5 * time.Second})
	if ExitCode(err) != ExitRejected || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("failed rebuild: %v", err)
	}

	err = f.cli.Reinit(ctx, ReinitOptions{Member: "db3", Force: true, Wait: true, Timeout: 100 * time.Millisecond})
	if ExitCode(err) != ExitTimeout {
		t.Fatalf("unanswered rebuild: %v", err)
	}
}
