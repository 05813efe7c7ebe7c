package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// seriesOf gathers c alone: the value of each of its series, by the value
// of label ("" for a series without it).
func seriesOf(t *testing.T, c prometheus.Collector, label string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == label {
					key = l.GetValue()
				}
			}
			out[key] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
		}
	}
	return out
}

// wantGauge fails unless c has one series, of value want.
func wantGauge(t *testing.T, what string, c prometheus.Collector, want float64) {
	t.Helper()
	got := seriesOf(t, c, "")
	if v, ok := got[""]; !ok || len(got) != 1 || v != want {
		t.Errorf("%s: series %v, want one of value %v", what, got, want)
	}
}

// wantAbsent fails unless c has no series.
func wantAbsent(t *testing.T, what string, c prometheus.Collector) {
	t.Helper()
	if got := seriesOf(t, c, ""); len(got) != 0 {
		t.Errorf("%s: series %v, want none (unknown)", what, got)
	}
}

// names is every value of an enum counted from 0 to n-1, by String.
func names[T interface {
	~uint8
	String() string
}](n T) []string {
	var out []string
	for v := range n {
		out = append(out, v.String())
	}
	return out
}

func roleNames() []string {
	var out []string
	for r := dcs.Role(0); r.Valid(); r++ {
		out = append(out, roleName(r))
	}
	return out
}

// Every value of every label enum has a name of its own: a constant added
// without one would label a series NewMetrics never created.
func TestMetricsLabelEnumsAreNamed(t *testing.T) {
	for what, vs := range map[string][]string{
		"fenceKind": names(numFenceKinds), "dcsOp": names(numDCSOps), "failoverPhase": names(numFailoverPhases), "role": roleNames(),
	} {
		for i, v := range vs {
			if v == "" || strings.Contains(v, "(") || slices.Index(vs, v) != i {
				t.Errorf("%s value %d is named %q: give it a name of its own", what, i, v)
			}
		}
	}
}

// Every labelled series exists at 0 from registration on, so rate() and
// absence alerts see the first event.
func TestMetricsEveryLabelValueStartsAtZero(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), "c", "m")
	for _, tc := range []struct {
		name  string
		c     prometheus.Collector
		label string
		want  []string
	}{
		{"fencing_actions_total", m.fencingActions, "kind", names(numFenceKinds)},
		{"dcs_errors_total", m.dcsErrors, "op", names(numDCSOps)},
		{"last_failover_phase_seconds", m.failoverPhase, "phase", names(numFailoverPhases)},
		{"role", m.role, "role", roleNames()},
	} {
		got := seriesOf(t, tc.c, tc.label)
		for _, v := range tc.want {
			if x, ok := got[v]; !ok || x != 0 {
				t.Errorf("%s{%s=%q}: %v (present %v), want 0 at registration", tc.name, tc.label, v, x, ok)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: series %v, want exactly %v", tc.name, got, tc.want)
		}
	}
}

// labelledUses lists, in file, what may label a series with a value that
// NewMetrics did not create: a vector's label-taking methods, a
// prometheus.Labels literal, or a conversion to a label enum (a value
// outside its constants).
func labelledUses(t *testing.T, fset *token.FileSet, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	vecMethods := []string{"WithLabelValues", "GetMetricWithLabelValues", "GetMetricWith", "CurryWith", "MustCurryWith"}
	enums := []string{"fenceKind", "dcsOp", "failoverPhase"}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if slices.Contains(vecMethods, n.Sel.Name) {
				out = append(out, fset.Position(n.Pos()).String()+": "+n.Sel.Name)
			}
		case *ast.CompositeLit:
			if s, ok := n.Type.(*ast.SelectorExpr); ok && s.Sel.Name == "Labels" {
				out = append(out, fset.Position(n.Pos()).String()+": a prometheus.Labels literal")
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && slices.Contains(enums, id.Name) {
				out = append(out, fset.Position(n.Pos()).String()+": a conversion to "+id.Name)
			}
		}
		return true
	})
	return out
}

// Labelled series are set only in metrics.go, by methods that take the
// label enums, whose every value NewMetrics initialises.
func TestMetricsLabelsOnlyThroughEnums(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "metrics.go" {
			continue
		}
		for _, use := range labelledUses(t, fset, file) {
			t.Errorf("%s outside metrics.go: label series through a Metrics method that takes a label enum, "+
				"so that NewMetrics initialises every value", use)
		}
	}
	// The scan finds what it looks for.
	if uses := labelledUses(t, fset, "metrics.go"); len(uses) < 4 {
		t.Fatalf("the scan found only %v in metrics.go", uses)
	}
}

// A phase of the last promotion whose duration is unknown is absent, not
// the previous promotion's.
func TestMetricsUnknownFailoverPhaseIsAbsent(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), "c", "m")
	m.setFailoverPhase(phaseDetect, 2*time.Second, true)
	m.setFailoverPhase(phasePromote, time.Second, true)
	m.setFailoverPhase(phaseDetect, 0, false)
	got := seriesOf(t, m.failoverPhase, "phase")
	if _, ok := got["detect"]; ok || got["promote"] != 1 {
		t.Fatalf("phases %v, want promote 1 and no detect", got)
	}
}

// The gauges of a primary and of a replica, then of a replica whose
// receiver stopped, whose lag changed, and whose mysqld died.
func TestLoopMetricsLocalGauges(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	p, r := h.agents["db1"].metrics, h.agents["db2"].metrics
	wantGauge(t, "primary mysql_up", p.MySQLUp, 1)
	wantGauge(t, "primary mysql_read_only", p.readOnly.vec, 0)
	wantAbsent(t, "primary replication_io_running", p.ioRunning.vec)
	wantAbsent(t, "primary replication_sql_running", p.sqlRunning.vec)
	wantGauge(t, "primary replication_lag_seconds", p.lagSeconds.vec, 0)
	wantGauge(t, "primary errant", p.Errant, 0)
	wantGauge(t, "replica mysql_up", r.MySQLUp, 1)
	wantGauge(t, "replica mysql_read_only", r.readOnly.vec, 1)
	wantGauge(t, "replica replication_io_running", r.ioRunning.vec, 1)
	wantGauge(t, "replica replication_sql_running", r.sqlRunning.vec, 1)
	wantGauge(t, "replica replication_lag_transactions", r.lagTransactions.vec, 0)

	h.mysql.byName("db2").behind = 7
	h.step("db2")
	wantGauge(t, "replica 7 s behind: replication_lag_seconds", r.lagSeconds.vec, 7)

	// A stopped receiver's Seconds_Behind_Source is stale: the lag grows
	// from the last one read while receiving, while the leader lives.
	h.mysql.byName("db2").ioRunning = false
	h.step("db2")
	wantGauge(t, "stopped receiver: replication_io_running", r.ioRunning.vec, 0)
	wantGauge(t, "stopped receiver: replication_sql_running", r.sqlRunning.vec, 1)
	wantGauge(t, "stopped receiver: replication_lag_seconds", r.lagSeconds.vec, 7)
	h.mysql.byName("db1").cutFromPeers = true // so the receiver stays down
	h.advance(5*time.Second, "db1", "db2")
	wantGauge(t, "receiver down for 5s: replication_lag_seconds", r.lagSeconds.vec, 12)
	h.mysql.byName("db1").cutFromPeers = false

	d := h.agents["db3"].metrics
	h.mysql.byName("db3").up = false
	h.step("db3")
	wantGauge(t, "mysqld down: mysql_up", d.MySQLUp, 0)
	wantAbsent(t, "mysqld down: mysql_read_only", d.readOnly.vec)
	wantAbsent(t, "mysqld down: replication_io_running", d.ioRunning.vec)
	wantAbsent(t, "mysqld down: replication_sql_running", d.sqlRunning.vec)
	wantAbsent(t, "mysqld down: replication_lag_seconds", d.lagSeconds.vec)
}

func TestLoopMetricsErrant(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	d := h.mysql.byName("db2")
	d.source, d.ioRunning = "", false
	d.commit(5)
	h.round()
	h.round()
	wantGauge(t, "errant replica: errant", h.agents["db2"].metrics.Errant, 1)
	wantGauge(t, "healthy replica: errant", h.agents["db3"].metrics.Errant, 0)
}

func TestLoopMetricsPausedAndUnlocked(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	for _, n := range h.names {
		wantGauge(t, n+" paused", h.agents[n].metrics.Paused, 0)
		wantGauge(t, n+" cluster_unlocked", h.agents[n].metrics.clusterUnlocked.vec, 0)
	}
	h.setPaused(true)
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	for _, n := range h.names {
		wantGauge(t, n+" in a paused cluster: paused", h.agents[n].metrics.Paused, 1)
		// agentctl pause --wait reads that the agent has seen it.
		if m, _ := cl.Member(n); m.Tags[failover.TagPaused] == "" {
			t.Errorf("%s's record lacks the %s tag in a paused cluster: %v", n, failover.TagPaused, m.Tags)
		}
	}
	// Paused, nobody takes the lock once it is gone.
	h.srv.ExpireLeader()
	h.step("db2")
	wantGauge(t, "lock expired: cluster_unlocked", h.agents["db2"].metrics.clusterUnlocked.vec, 1)
}

func TestLoopMetricsDCSLastSuccess(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	unix := func() float64 { return float64(h.clock.Now().UnixNano()) / 1e9 }
	wantGauge(t, "before any DCS call: dcs_last_success_timestamp_seconds", h.agents["db2"].metrics.DCSLastSuccess, 0)
	h.bootstrap()
	for _, n := range h.names {
		wantGauge(t, n+" dcs_last_success_timestamp_seconds", h.agents[n].metrics.DCSLastSuccess, unix())
	}
	cut := unix()
	h.srv.Partition("db2")
	h.advance(3*time.Second, h.names...)
	r := h.agents["db2"].metrics
	wantGauge(t, "partitioned: dcs_last_success_timestamp_seconds", r.DCSLastSuccess, cut)
	wantGauge(t, "leader: dcs_last_success_timestamp_seconds", h.agents["db1"].metrics.DCSLastSuccess, unix())
	if got := seriesOf(t, r.dcsErrors, "op")["member"]; got == 0 {
		t.Error(`partitioned: dcs_errors_total{op="member"} is 0`)
	}
	h.srv.Heal("db2")
	h.step("db2")
	wantGauge(t, "healed: dcs_last_success_timestamp_seconds", r.DCSLastSuccess, unix())
}

// failover_candidate follows failover.Ineligibility: the leader, a
// nofailover member and a member whose mysqld is down are none; the
// settings the alerts compare against are published beside it.
func TestLoopMetricsFailoverCandidate(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.noFailover["db3"] = true
	h.startAgent("db3")
	h.bootstrap()
	h.round()
	wantGauge(t, "leader failover_candidate", h.agents["db1"].metrics.FailoverCandidate, 0)
	wantGauge(t, "replica failover_candidate", h.agents["db2"].metrics.FailoverCandidate, 1)
	wantGauge(t, "nofailover replica failover_candidate", h.agents["db3"].metrics.FailoverCandidate, 0)
	h.mysql.byName("db2").up = false
	h.step("db2")
	wantGauge(t, "mysqld down: failover_candidate", h.agents["db2"].metrics.FailoverCandidate, 0)

	cfg := dcs.DefaultConfig()
	for _, n := range []string{"db1", "db3"} {
		m := h.agents[n].metrics
		wantGauge(t, n+" ttl_seconds", m.TTL, cfg.TTL.Seconds())
		wantGauge(t, n+" maximum_lag_on_failover_seconds", m.MaxLag, cfg.MaximumLagOnFailover.Seconds())
		wantGauge(t, n+" rebuilding", m.Rebuilding, 0)
	}
}
