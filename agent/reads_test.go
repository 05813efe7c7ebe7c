package agent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// readyz is what the kubelet's readiness probe of member gets.
func (h *loopHarness) readyz(member string) int {
	rec := httptest.NewRecorder()
	h.agents[member].Handler(prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code
}

// wantReads checks that member serves reads (why == "") or not, for the
// reason why, in its /status, its record and its readiness.
func (h *loopHarness) wantReads(step, member, why string) {
	h.t.Helper()
	st, rec, code := h.agents[member].Status(), h.record(member), h.readyz(member)
	wantCode := http.StatusOK
	if why != "" {
		wantCode = http.StatusServiceUnavailable
	}
	if !strings.Contains(st.ReadsOff, why) || (why == "") != (st.ReadsOff == "") ||
		rec.Tags[failover.TagNoReads] != st.ReadsOff || code != wantCode {
		h.t.Fatalf("%s: %s reads_off %q, record tag %q, /readyz %d; want %q, %d",
			step, member, st.ReadsOff, rec.Tags[failover.TagNoReads], code, why, wantCode)
	}
}

// A replica far behind its source leaves the read Service (its pod is not
// Ready) and comes back once it has caught up, saying so each time; the
// primary's readiness does not depend on it.
func TestLoopLaggingReplicaLeavesReads(t *testing.T) {
	cfg := dcs.DefaultConfig()
	cfg.MaximumLagForReads = 10 * time.Second
	h := newLoopHarnessWith(t, cfg, "db1", "db2", "db3")
	h.bootstrap()
	h.wantReads("streaming", "db2", "")

	h.mysql.byName("db2").behind = 11
	h.round()
	h.wantReads("11 s behind", "db2", "lag 11s over maximum_lag_for_reads 10s")
	h.wantReads("the other replica", "db3", "")
	if !h.hasEvent("db2", "ReadsOff") {
		t.Fatal("no ReadsOff Event on db2")
	}
	if code := h.readyz("db1"); code != http.StatusOK {
		t.Fatalf("the primary's /readyz %d", code)
	}

	h.mysql.byName("db2").behind = 0
	h.round()
	h.wantReads("caught up", "db2", "")
	if !h.hasEvent("db2", "ReadsOn") {
		t.Fatal("no ReadsOn Event on db2")
	}
}

// A replica whose receiver cannot reach a primary that lives and writes
// leaves the read Service once it has received nothing for the limit, and
// not at the first moment: a repoint or a restarted receiver is a blip.
// With the limit at 0 it keeps serving, however stale.
func TestLoopReplicaCutFromItsSourceLeavesReads(t *testing.T) {
	cfg := dcs.DefaultConfig()
	cfg.MaximumLagForReads = 10 * time.Second
	h := newLoopHarnessWith(t, cfg, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db1").cutFromPeers = true
	h.advance(5*time.Second, h.names...)
	h.wantReads("cut for 5 s", "db3", "")
	h.advance(7*time.Second, h.names...)
	h.wantReads("cut for 12 s", "db3", "over maximum_lag_for_reads 10s")

	h.setConfig(func(c *dcs.Config) { c.MaximumLagForReads = 0 })
	h.round()
	h.wantReads("limit 0", "db3", "")

	h.setConfig(func(c *dcs.Config) { c.MaximumLagForReads = 10 * time.Second })
	h.mysql.byName("db1").cutFromPeers = false
	h.round()
	h.wantReads("receives again", "db3", "")
}

// When the primary dies, every replica's receiver is down until a new
// primary serves, and nobody writes: the replicas keep serving reads
// throughout the failover.
func TestLoopReplicasServeReadsThroughAFailover(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db1").up = false
	h.stepUntil(30*time.Second, "a new primary", func() bool {
		for _, name := range []string{"db2", "db3"} {
			if st := h.agents[name].Status(); st.Role == "replica" && (st.ReadsOff != "" || h.readyz(name) != http.StatusOK) {
				t.Fatalf("%s left the read Service during the failover: %q, /readyz %d", name, st.ReadsOff, h.readyz(name))
			}
		}
		return h.holder() != "db1" && h.holder() != "" && h.mysql.writable() != nil
	}, "db2", "db3")
}
