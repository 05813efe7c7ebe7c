package agent

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The load balancers' checks: /primary answers 200 only on the writable
// lock holder, /replica only on a streaming replica, within ?lag= when
// given.
func TestLoadBalancerChecks(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db2").behind = 45
	h.round()
	get := func(member, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.agents[member].Handler(prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct {
		member, path string
		want         int
	}{
		{"db1", "/primary", 200}, {"db2", "/primary", 503},
		{"db1", "/replica", 503}, {"db2", "/replica", 200},
		{"db2", "/replica?lag=30s", 503}, {"db2", "/replica?lag=30", 503},
		{"db2", "/replica?lag=1m", 200}, {"db2", "/replica?lag=60", 200},
		{"db1", "/replica?lag=1m", 503},
	} {
		if code, body := get(c.member, c.path); code != c.want {
			t.Errorf("%s GET %s: %d, want %d\n%s", c.member, c.path, code, c.want, body)
		}
	}
	for _, bad := range []string{"soon", "-5s", "1.5"} {
		if code, body := get("db2", "/replica?lag="+bad); code != 400 || !strings.Contains(body, "lag=") {
			t.Errorf("GET /replica?lag=%s: %d %q, want 400 naming lag", bad, code, body)
		}
	}
}

// The plain-HTTP health listener (--health-listen) answers the health
// checks, and nothing that serves data or changes state: it has no
// authentication.
func TestHealthOnlyServesTheHealthChecksAlone(t *testing.T) {
	h := HealthOnly(fuzzAgent(t).Handler(prometheus.NewRegistry()))
	for _, path := range HealthPaths {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code == http.StatusNotFound {
			t.Errorf("GET %s: 404, want the health check's answer", path)
		}
	}
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/status", nil),
		httptest.NewRequest(http.MethodGet, "/metrics", nil),
		httptest.NewRequest(http.MethodGet, "/clone?member=db2", nil),
		httptest.NewRequest(http.MethodPost, "/failsafe", strings.NewReader(`{"leader":"db2","instance":"0123456789abcdef"}`)),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "serves only /healthz") {
			t.Errorf("%s %s: %d %q, want 404 naming what is served", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
}
