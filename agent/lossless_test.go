package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

func strictConfig() dcs.Config {
	c := dcs.DefaultConfig()
	c.SemiSync = dcs.SemiSyncStrict
	return c
}

// A write acknowledged by db3 alone, then db1 dies with db3 hung: db2 wins
// the lock but must not unfence while db3, which may hold acknowledged
// transactions db2 lacks, does not answer. Once db3 answers, db2 sees it
// ahead and lets it lead, and the write survives.
func TestLoopLosslessPromotionWaitsForEveryAcknowledger(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	primary, db3 := h.mysql.byName("db1"), h.mysql.byName("db3")
	if ss := h.agents["db1"].Status().SemiSync; ss == nil || ss.AcknowledgingReplicas != 2 || ss.Stalled != "" {
		t.Fatalf("primary's semi-sync status %+v, want 2 acknowledging replicas", ss)
	}
	if !h.mysql.write("db1") {
		t.Fatal("write on the primary refused")
	}
	db3.Observe(h.ctx) // db3 receives (and acknowledges) it; db2 does not
	acked := db3.pos()

	h.killAgent("db1")
	primary.up = false
	db3.unreachable = true
	h.unreachable["db3"] = true
	h.advance(15*time.Second, "db2", "db3")
	if w := h.mysql.writable(); len(w) > 0 {
		t.Fatalf("%v writable while db3, which may hold an acknowledged write, does not answer", w)
	}
	if h.holder() != "db2" {
		t.Fatalf("holder %q: db2 should hold the lock and wait", h.holder())
	}

	db3.unreachable = false
	delete(h.unreachable, "db3")
	h.advance(15*time.Second, "db2", "db3")
	h.expectPrimary("db3")
	if db3.pos() != acked {
		t.Fatalf("new primary at %s, want the acknowledged write %s", db3.pos(), acked)
	}
}

// A replica that cannot acknowledge (no semi-sync receiver) publishes it,
// and in strict mode never takes over, even ahead of the others.
func TestLoopLosslessAsyncReplicaNeverTakesOver(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.mysql.byName("db3").noSemiSyncReplica = true
	h.bootstrap()
	h.round()
	cl, err := h.agents["db1"].store.Cluster(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cl.Member("db3")
	if m.Tags[failover.TagAsync] == "" {
		t.Fatalf("db3's record tags %v lack %q", m.Tags, failover.TagAsync)
	}
	if ss := h.agents["db3"].Status().SemiSync; ss == nil || !ss.Async {
		t.Fatalf("db3's /status semi_sync %+v, want async", ss)
	}
	h.mysql.write("db1")
	h.mysql.byName("db3").Observe(h.ctx) // only db3 has the last write: it was never acknowledged

	h.killAgent("db1")
	h.mysql.byName("db1").up = false
	h.advance(15*time.Second, "db2", "db3")
	h.expectPrimary("db2")
}

// With no replica left to acknowledge, a strict primary's writes wait: it
// says so in /status, its record and its metrics.
func TestLoopLosslessStalledPrimaryIsVisible(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	for _, n := range []string{"db2", "db3"} {
		h.killAgent(n)
		h.mysql.byName(n).up = false
	}
	h.advance(2*time.Second, "db1")
	h.expectPrimary("db1")
	ss := h.agents["db1"].Status().SemiSync
	if ss == nil || ss.Stalled == "" || ss.AcknowledgingReplicas != 0 {
		t.Fatalf("/status semi_sync %+v, want stalled", ss)
	}
	cl, err := h.agents["db1"].store.Cluster(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := cl.Member("db1"); m.Tags[failover.TagStalled] == "" {
		t.Fatalf("db1's record tags %v lack %q", m.Tags, failover.TagStalled)
	}
	if got := testutil.ToFloat64(h.agents["db1"].metrics.SemiSyncStalled); got != 1 {
		t.Fatalf("semi_sync_stalled = %v, want 1", got)
	}
}

// A member scaled away leaves its record behind (Kubernetes; the memory
// DCS here): stale, its mysqld unreachable for good. In lossless mode it
// must not block every later promotion: the primary lists the members that
// may hold its acknowledged writes, drops db3 once db2 streams all db3 may
// have acknowledged, and db2 then promotes without waiting for db3.
func TestLoopLosslessLeftoverRecordDoesNotBlockPromotion(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	if tags := h.record("db1").Tags; tags[failover.TagAcknowledgers] != "db2,db3" {
		t.Fatalf("db1's record tags %v, want acknowledgers db2,db3", tags)
	}
	h.killAgent("db3")
	db3 := h.mysql.byName("db3")
	db3.unreachable, db3.ioRunning = true, false // the pod is gone: no server, no connection to db1
	h.unreachable["db3"] = true
	h.mysql.write("db1")
	h.advance(40*time.Second, "db1", "db2") // db3's record goes stale
	if tags := h.record("db1").Tags; tags[failover.TagAcknowledgers] != "db2" {
		t.Fatalf("db1's record tags %v, want acknowledgers db2 alone", tags)
	}

	h.killAgent("db1")
	h.mysql.byName("db1").up = false
	h.advance(15*time.Second, "db2")
	h.expectPrimary("db2")
}

// A replica whose SQL thread broke holds an acknowledged write only in its
// relay log, and has executed nothing. It must not repoint to the promoting
// holder (CHANGE MASTER drops the relay log) before that holder is
// writable: the holder would then see the write nowhere and promote
// without it. Found by the random-fault loop test (SOAK_SEED=1921, strict).
func TestLoopLosslessRelayOnlyAcknowledgerKeepsItsRelayLog(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	db2, db3 := h.mysql.byName("db2"), h.mysql.byName("db3")
	h.mysql.mu.Lock()
	db2.sqlBroken, db3.ioRunning = true, false
	h.mysql.mu.Unlock()
	h.mysql.write("db1")
	db2.Observe(h.ctx) // db2 receives and acknowledges it, and cannot apply it
	h.mysql.mu.Lock()
	acked := slices.Clone(h.mysql.confirmed)
	h.mysql.mu.Unlock()
	if len(acked) != 1 || db2.pos() != "" {
		t.Fatalf("test bug: confirmed %v, db2 executed %q", acked, db2.pos())
	}
	h.kill9("db1")
	for range 20 {
		h.clock.Step(time.Second)
		h.step("db2", "db3")
		for _, w := range h.mysql.writable() {
			if !h.mysql.byName(w).has(acked[0]) {
				t.Fatalf("%s writable without the acknowledged write %s", w, acked[0])
			}
		}
	}
}
