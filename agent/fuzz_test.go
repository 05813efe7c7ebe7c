package agent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// fuzzAgent is an agent that never runs its loop: enough to serve its API.
func fuzzAgent(tb testing.TB) *Agent {
	srv := memory.NewServer("fuzz")
	store, err := srv.NewStore(memory.Options{Member: "db1"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	cfg := failsafeConfig()
	a, err := New(Config{Cluster: "fuzz", Name: "db1", MySQLAddr: "10.0.0.1:3306", APIURL: "http://db1:8008",
		ReplicationUser: "repl", Bootstrap: cfg},
		Deps{Store: store, LocalAddr: "10.0.0.1:3306", Dial: newFakeMySQL("db1").dial, Logger: zap.NewNop(),
			Metrics: NewMetrics(prometheus.NewRegistry(), "fuzz", "db1")})
	if err != nil {
		tb.Fatal(err)
	}
	a.publishStatus(mysqlctl.Observation{}, nil, &dcs.Cluster{Config: cfg}, failover.Action{})
	return a
}

// FuzzFailsafeHTTP: no body of POST /failsafe makes the agent panic or
// answer anything but 200, 400 or 409.
func FuzzFailsafeHTTP(f *testing.F) {
	for _, s := range []string{`{"leader":"db2","instance":"0123456789abcdef"}`, `{"leader":"db1","instance":"x"}`,
		"", "{", "null", `{"leader":5}`, `[]`, "\x00"} {
		f.Add([]byte(s))
	}
	h := fuzzAgent(f).Handler(prometheus.NewRegistry())
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/failsafe", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusConflict:
		default:
			t.Fatalf("POST /failsafe %q: %d", body, rec.Code)
		}
	})
}

// FuzzPeerStatus: no answer of a peer's GET /status makes the agent panic;
// what it accepts is turned into a failover candidate.
func FuzzPeerStatus(f *testing.F) {
	for _, s := range []string{`{"name":"db2","healthy":true,"gtid_executed":"0-1-5","replication":"running"}`,
		`{"name":"db2","semi_sync":{"mode":"strict","async":true},"failsafe_promise":"db1"}`, "", "{", "null", `{"lag_seconds":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
		defer srv.Close()
		st, err := HTTPPeerStatus(srv.Client())(context.Background(), srv.URL)
		if err != nil {
			return
		}
		toCandidate(dcs.Member{Name: "db2", APIURL: srv.URL}, map[string]*MemberStatus{"db2": st}, true)
	})
}
