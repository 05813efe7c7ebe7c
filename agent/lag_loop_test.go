package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// record is name's member record as db1's store reads it.
func (h *loopHarness) record(name string) dcs.Member {
	h.t.Helper()
	cl, err := h.agents["db1"].store.Cluster(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	m, ok := cl.Member(name)
	if !ok {
		h.t.Fatalf("no record of %s", name)
	}
	return m
}

// A replica cut from its source for longer than maximum_lag_on_failover,
// while the leader lives and writes, is that far behind: its record, its
// /status and its metric say so, and it is not a failover candidate. It used
// to report the stale 0 its stopped receiver showed, for ever.
func TestLoopStoppedReceiverLagGrows(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	maxLag := dcs.DefaultConfig().MaximumLagOnFailover
	lastReceived := h.clock.Now()
	// db1 lives and keeps the lock, but its replicas cannot reach it; their
	// Seconds_Behind_Master stays at the stale 0.
	h.mysql.byName("db1").cutFromPeers = true
	h.advance(maxLag+2*time.Second, h.names...)
	want := h.clock.Since(lastReceived)

	// The record's lag is refreshed at a bounded rate, but written at once
	// when it crosses the limit (with the tag).
	rec := h.record("db3")
	if rec.Lag == nil || *rec.Lag <= maxLag || *rec.Lag > want || rec.Receiver != dcs.ReceiverConnecting {
		t.Fatalf("db3's record: lag %s, receiver %q; want lag over %s, receiver connecting", fmtLag(rec.Lag), rec.Receiver, maxLag)
	}
	if rec.Tags[failover.TagLagging] == "" {
		t.Fatalf("db3's record lacks the %q tag: %v", failover.TagLagging, rec.Tags)
	}
	if why := failover.Ineligibility(toCandidate(rec, nil, false), failover.Rules{MaxLag: maxLag}); !strings.Contains(why, "lag") {
		t.Fatalf("db3 has received nothing for %s, yet it is eligible (%q)", want, why)
	}
	st := h.agents["db3"].Status()
	if st.LagSeconds == nil || *st.LagSeconds != int64(want/time.Second) || st.Receiver != "connecting" {
		t.Fatalf("db3's /status: lag_seconds %v, receiver %q; want %d, connecting", st.LagSeconds, st.Receiver, int64(want/time.Second))
	}
	wantGauge(t, "db3 replication_lag_seconds", h.agents["db3"].metrics.lagSeconds.vec, want.Seconds())

	h.mysql.byName("db1").cutFromPeers = false
	h.round()
	rec = h.record("db3")
	if rec.Lag == nil || *rec.Lag != 0 || rec.Receiver != dcs.ReceiverRunning || rec.Tags[failover.TagLagging] != "" {
		t.Fatalf("db3 receives again: record lag %s, receiver %q, tags %v; want 0, running, not lagging",
			fmtLag(rec.Lag), rec.Receiver, rec.Tags)
	}
}

// When the primary dies, every replica's receiver is down until one of
// them takes over. That outage must not count as lag, even with a limit
// below ttl (how long the loss takes to notice): otherwise nobody would be
// eligible and the cluster would stay without a primary.
func TestLoopFailoverOutageDoesNotMakeReplicasIneligible(t *testing.T) {
	cfg := dcs.DefaultConfig()
	cfg.MaximumLagOnFailover = cfg.TTL / 2
	h := newLoopHarnessWith(t, cfg, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db1").up = false // the primary's pod is gone: mysqld and agent
	h.advance(cfg.TTL+5*time.Second, "db2", "db3")
	h.expectPrimary("db2")
	h.expectReplicaOf("db3", "db2")
}

// Paused, a leader whose mysqld died stops renewing, and nobody takes its
// expired lock: however long that lasts, the replicas stay eligible (a dead
// source writes nothing), and one takes over once the cluster is resumed.
func TestLoopLongPauseWithTheSourceDownKeepsReplicasEligible(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	maxLag := dcs.DefaultConfig().MaximumLagOnFailover
	h.setPaused(true)
	h.mysql.byName("db1").up = false
	h.advance(10*maxLag, h.names...)
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("paused, yet %v took over", w)
	}
	for _, name := range []string{"db2", "db3"} {
		if lag := h.agents[name].lag.at(h.clock.Now()); lag == nil || *lag > maxLag {
			t.Fatalf("%s: lag %s after %s with the source down; want it frozen below %s", name, fmtLag(lag), 10*maxLag, maxLag)
		}
	}
	h.setPaused(false)
	h.advance(8*time.Second, h.names...)
	h.expectPrimary("db2")
}

// An agent restarted while its receiver is down does not know how long it
// has been down: it starts from what its record last said, not from 0.
func TestLoopRestartWithReceiverDownKeepsThePublishedLag(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	maxLag := dcs.DefaultConfig().MaximumLagOnFailover
	h.mysql.byName("db1").cutFromPeers = true
	h.advance(maxLag+2*time.Second, h.names...)
	before := h.record("db3").Lag
	if before == nil || *before <= maxLag {
		t.Fatalf("test bug: db3's record shows lag %s, want over %s", fmtLag(before), maxLag)
	}
	h.startAgent("db3")
	h.advance(time.Second, h.names...)
	got := h.agents["db3"].lag.at(h.clock.Now())
	if got == nil || *got < *before {
		t.Fatalf("restarted db3 reports lag %s; want at least the %s published before", fmtLag(got), *before)
	}
}
