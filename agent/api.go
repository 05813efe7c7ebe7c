package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mysqlha/mysqlha/dcs"
)

// Handler serves the agent's HTTP API:
//
//	GET /healthz   200 while the loop runs (an iteration within 3 loop_waits)
//	GET /readyz    200 for a primary holding the lock and writable, or a
//	               replica that serves reads (within maximum_lag_for_reads,
//	               failover.ReadRefusal)
//	GET /primary   200 only on the writable lock holder (for load balancers)
//	GET /replica   200 only on a streaming replica; with ?lag=30s (or 30,
//	               seconds) only on one at most that far behind
//	GET /lock      200 while this agent holds the leader lock (the database
//	               container's preStop hook waits for the hand-over on it)
//	GET /status    this member as JSON (MemberStatus)
//	GET /cluster   the last DCS snapshot as JSON
//	POST /failsafe a leader asks this member to confirm it while the DCS is
//	               unreachable (failsafe mode): 200, or 409 and why not
//	GET /clone     a backup stream (xbstream) of this member's mysqld for the
//	               member a pending reinit request names (agentctl reinit)
//	GET /metrics   Prometheus metrics from gatherer
func (a *Agent) Handler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		a.statusMu.Lock()
		last := a.lastLoop
		a.statusMu.Unlock()
		cfg := a.config()
		if age := a.clock.Since(last); last.IsZero() || age > 3*cfg.LoopWait+cfg.RetryTimeout {
			http.Error(w, "HA loop stalled", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		st := a.Status()
		ok := a.isPrimary(st) || (st.Role == roleName(dcs.RoleReplica) && st.ReadsOff == "")
		writeStatus(w, ok, st)
	})
	mux.HandleFunc("GET /primary", func(w http.ResponseWriter, r *http.Request) {
		st := a.Status()
		writeStatus(w, a.isPrimary(st), st)
	})
	mux.HandleFunc("GET /replica", func(w http.ResponseWriter, r *http.Request) {
		maxLag, err := lagParam(r.URL.Query().Get("lag"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		st := a.Status()
		writeStatus(w, a.isReplica(st, maxLag), st)
	})
	mux.HandleFunc("GET /lock", func(w http.ResponseWriter, r *http.Request) {
		st := a.Status()
		writeStatus(w, st.HoldsLock, st)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, true, a.Status())
	})
	mux.HandleFunc("GET /cluster", func(w http.ResponseWriter, r *http.Request) {
		a.statusMu.Lock()
		cl := a.cluster
		a.statusMu.Unlock()
		if cl == nil {
			http.Error(w, "no DCS snapshot yet", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, http.StatusOK, clusterView(cl))
	})
	mux.HandleFunc("POST /failsafe", a.serveFailsafe)
	mux.HandleFunc("GET /clone", a.serveClone)
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// HealthPaths are the endpoints that answer anyone, with their status code
// (the kubelet's probes, load balancers, the preStop hook); the others
// serve data or change state and need authentication (apiauth.Guard).
var HealthPaths = []string{"/healthz", "/readyz", "/primary", "/replica", "/lock"}

// HealthOnly serves HealthPaths from h and 404 for anything else: the
// plain-HTTP listener (--health-listen) beside an API that serves TLS,
// for what cannot speak TLS (the preStop hook's bash).
func HealthOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(HealthPaths, r.URL.Path) {
			http.Error(w, r.URL.Path+" is not served here: this listener (--health-listen) serves only "+strings.Join(HealthPaths, ", "), http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *Agent) isPrimary(st MemberStatus) bool {
	return st.Role == roleName(dcs.RolePrimary) && st.HoldsLock && st.Writable
}

func (a *Agent) isReplica(st MemberStatus, maxLag time.Duration) bool {
	if st.Role != roleName(dcs.RoleReplica) || st.Replication != dcs.ReplicationRunning.String() {
		return false
	}
	return maxLag <= 0 || (st.LagSeconds != nil && time.Duration(*st.LagSeconds)*time.Second <= maxLag)
}

// lagParam reads /replica's lag bound: a duration ("30s") or a number of
// seconds ("30"); "" is no bound.
func lagParam(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("lag=%q: give a positive duration (30s) or a number of seconds (30)", v)
	}
	return d, nil
}

func writeStatus(w http.ResponseWriter, ok bool, st MemberStatus) {
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// ClusterView is the JSON form of a DCS snapshot.
type ClusterView struct {
	Name        string             `json:"name"`
	Leader      *dcs.Leader        `json:"leader,omitempty"`
	Members     []dcs.Member       `json:"members"`
	Config      dcs.Config         `json:"config"`
	Switchover  *dcs.Switchover    `json:"switchover,omitempty"`
	Reinit      *dcs.Reinit        `json:"reinit,omitempty"`
	Initialized *dcs.Initialized   `json:"initialized,omitempty"`
	History     []dcs.HistoryEntry `json:"history,omitempty"`
	Problems    []string           `json:"problems,omitempty"`
}

func clusterView(cl *dcs.Cluster) ClusterView {
	v := ClusterView{Name: cl.Name, Leader: cl.Leader, Members: cl.Members, Config: cl.Config,
		Switchover: cl.Switchover, Reinit: cl.Reinit, Initialized: cl.Initialized, History: cl.History}
	for _, p := range cl.Problems {
		v.Problems = append(v.Problems, p.Error())
	}
	return v
}
