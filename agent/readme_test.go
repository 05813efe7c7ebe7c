package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/testenv/readmetest"
)

// TestREADMEMetrics keeps the metrics table of docs/reference.md what NewMetrics
// registers; -update-readme rewrites it.
func TestREADMEMetrics(t *testing.T) {
	readmetest.SectionIn(t, "docs/reference.md", "metrics", metricsTable(t))
}

// countingRegisterer counts the metrics described to it, so that a metric
// with no series (and so missing from a Gather) is noticed.
type countingRegisterer struct {
	prometheus.Registerer
	descs int
}

func (r *countingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for range ch {
			r.descs++
		}
	}
	r.Registerer.MustRegister(cs...)
}

// metricsTable renders the markdown table of what NewMetrics registers:
// name, type, labels (with their values when the metric has several
// series) and help.
func metricsTable(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	rec := &countingRegisterer{Registerer: reg}
	m := NewMetrics(rec, "c", "m")
	// The series that are absent while unknown: give them a value.
	zero := int64(0)
	m.setLocal(mysqlctl.Observation{Replica: &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadRunning,
		SQLThread: mysqlctl.ThreadRunning, SecondsBehind: &zero}}, nil, false, new(time.Duration))
	m.setCluster(&dcs.Cluster{}, dcs.Config{})
	m.setLagTransactions(0, true)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != rec.descs {
		var names []string
		for _, f := range families {
			names = append(names, f.GetName())
		}
		t.Fatalf("NewMetrics registers %d metrics, but only these %d have a series: %v; give the others a value in metricsTable",
			rec.descs, len(families), names)
	}
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, f := range families {
		values := map[string]map[string]bool{}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if n := l.GetName(); n != "cluster" && n != "member" {
					if values[n] == nil {
						values[n] = map[string]bool{}
					}
					values[n][l.GetValue()] = true
				}
			}
		}
		var labels []string
		sep := ", "
		for _, n := range slices.Sorted(maps.Keys(values)) {
			l := "`" + n + "`"
			if len(f.GetMetric()) > 1 { // a vector: list its values
				l += ": `" + strings.Join(slices.Sorted(maps.Keys(values[n])), "`, `") + "`"
				sep = "; "
			}
			labels = append(labels, l)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.GetName(), strings.ToLower(f.GetType().String()),
			strings.Join(labels, sep), strings.ReplaceAll(f.GetHelp(), "|", `\|`))
	}
	return b.String()
}
