package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkAgentctl: how long an operator waits for agentctl, *flagTrials
// runs each: `agentctl --help` (the process's start-up alone: no DCS) and
// `agentctl status` against a healthy 3-member cluster on etcd and on
// Kubernetes (start-up, one read of the DCS, each member's /status).
func BenchmarkAgentctl(b *testing.B) {
	measureOnce(b, func() []benchFigure {
		var tbl strings.Builder
		fmt.Fprintf(&tbl, "  %d runs each, wall time from exec to exit\n", *flagTrials)
		fmt.Fprintf(&tbl, "  %-28s %8s %8s %8s\n", "command", "p50 ms", "p95 ms", "max ms")
		var figs []benchFigure
		row := func(name string, took []time.Duration) {
			slices.Sort(took)
			p50, p95, top := percentile(took, 50), percentile(took, 95), took[len(took)-1]
			fmt.Fprintf(&tbl, "  %-28s %8.1f %8.1f %8.1f\n", name, msec(p50), msec(p95), msec(top))
			unit := strings.ReplaceAll(strings.ReplaceAll(name, "-", ""), " ", "-") // agentctl-help-p50-ms
			figs = append(figs, benchFigure{msec(p50), unit + "-p50-ms"})
		}
		row("agentctl --help", timeAgentctl(b, nil, "--help"))
		for _, backend := range []struct {
			name string
			opts Options
		}{{"etcd", Options{}}, {"kubernetes", Options{Kubernetes: true}}} {
			c := NewCluster(b, backend.opts)
			c.Bootstrap()
			c.WaitHealthy(30 * time.Second)
			row("agentctl status "+backend.name, timeAgentctl(b, c.ctlArgs(), "status"))
		}
		fmt.Printf("%s:\n%s", b.Name(), tbl.String())
		return figs
	})
}

// timeAgentctl runs agentctl with global then args *flagTrials times, after
// one unmeasured run (the page cache), and fails on a non-zero exit.
func timeAgentctl(b *testing.B, global []string, args ...string) []time.Duration {
	b.Helper()
	argv := append(slices.Clone(global), args...)
	var took []time.Duration
	for i := range *flagTrials + 1 {
		r := runAgentctl(b, argv...)
		if r.Code != 0 {
			b.Fatalf("agentctl failed:\n%s", r)
		}
		if i > 0 {
			took = append(took, r.Took())
		}
	}
	return took
}

func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
