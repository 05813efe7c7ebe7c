package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mysqlha/mysqlha/dcs"
)

// TestConfigChangeWhileServing: the loop adopts changed configs (agentctl
// set-config) while the watchdog and the HTTP API read timings on their
// own goroutines. Run with -race: it reports the unsynchronised read.
func TestConfigChangeWhileServing(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	a := h.agents["db1"]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.watchdog(ctx) })
	srv := a.Handler(prometheus.NewRegistry())
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, path := range []string{"/healthz", "/readyz", "/status"} {
				srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
			}
		}
	})
	cfg := dcs.DefaultConfig()
	for i := range 200 {
		cfg.RetryTimeout = time.Second + time.Duration(i%2)*time.Millisecond
		a.adoptClusterConfig(&dcs.Cluster{Config: cfg, ConfigVersion: "v"})
		a.setDeadline(h.clock.Now().Add(time.Hour)) // wakes the watchdog
	}
	cancel()
	wg.Wait()
	if got := a.config().RetryTimeout; got != cfg.RetryTimeout {
		t.Fatalf("shared retry_timeout %v, want the last adopted %v", got, cfg.RetryTimeout)
	}
}
