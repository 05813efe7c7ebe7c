package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/internal/apitls"
)

// Failsafe mode (cluster config failsafe_mode) keeps a healthy primary
// writable while the DCS is unreachable, but only while every member of
// its last known member set confirms, over HTTP, that it sees this leader
// and will not race for the lock (failover.FailsafePromise and
// failover.FailsafeUnconfirmed hold the rules). The leader extends its
// deadline to the start of the round plus its ttl minus safety_margin, so
// it fences before any promise it relies on can lapse.

// FailsafeRequest is what a leader posts to every member (POST /failsafe).
type FailsafeRequest struct {
	Leader   string `json:"leader"`
	Instance string `json:"instance"`
	// HoldMillis is how long the leader relies on the promise: its ttl,
	// by which it extends its deadline. 0 (an older agent): the member's
	// own ttl.
	HoldMillis int64 `json:"hold_ms,omitempty"`
}

// PeerFailsafe asks the agent at apiURL to confirm req; nil means it did.
type PeerFailsafe func(ctx context.Context, apiURL string, req FailsafeRequest) error

// HTTPPeerFailsafe returns a PeerFailsafe that POSTs to <apiURL>/failsafe.
func HTTPPeerFailsafe(client *http.Client) PeerFailsafe {
	return func(ctx context.Context, apiURL string, fr FailsafeRequest) error {
		body, err := json.Marshal(fr)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(apiURL, "/")+"/failsafe", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("POST %s/failsafe: %s: %s", apiURL, resp.Status, strings.TrimSpace(string(msg)))
		}
		return nil
	}
}

// failsafePromise is the leader we promised not to race against, until.
type failsafePromise struct {
	leader, instance string
	until            time.Time
}

// acceptFailsafe answers a leader's POST /failsafe: it confirms, and
// promises not to race for as long as failover.FailsafePromise says, or
// refuses.
func (a *Agent) acceptFailsafe(req FailsafeRequest) error {
	a.statusMu.Lock()
	defer a.statusMu.Unlock()
	ask := failover.FailsafeAsk{Leader: req.Leader, Instance: req.Instance, Hold: time.Duration(req.HoldMillis) * time.Millisecond}
	hold, err := failover.FailsafePromise(ask, a.failsafe)
	if err != nil {
		return err
	}
	a.promise = failsafePromise{leader: req.Leader, instance: req.Instance, until: a.clock.Now().Add(hold)}
	return nil
}

// promisedLeader is the leader we promised not to race against, "" when
// no promise holds now.
func (a *Agent) promisedLeader() string {
	a.statusMu.Lock()
	defer a.statusMu.Unlock()
	if a.clock.Now().Before(a.promise.until) {
		return a.promise.leader
	}
	return ""
}

// publishFailsafeView records what acceptFailsafe judges by; the caller
// holds statusMu.
func (a *Agent) publishFailsafeView(cl *dcs.Cluster) {
	v := failover.FailsafeView{Self: a.self.Name, Enabled: a.clusterConfig.Failsafe, TTL: a.clusterConfig.TTL, Holding: a.hasDeadline()}
	if cl != nil && cl.Leader != nil && !cl.Leader.Expired {
		v.Leader, v.Instance = cl.Leader.Holder, cl.Leader.Instance
	}
	a.failsafe = v
}

// failsafeRenew stands in for a lock renewal that failed (the DCS refused
// the connection, or did not answer within retry_timeout): with failsafe
// mode on, it asks every other member of the last snapshot to confirm us,
// in parallel within retry_timeout/2. Only when all do does the deadline
// move, to start + ttl - safety_margin; otherwise failsafe ends, and the
// deadline stands.
func (a *Agent) failsafeRenew(ctx context.Context, start time.Time) bool {
	cl := a.lastCluster
	if !a.clusterConfig.Failsafe || !a.hasDeadline() || cl == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, a.clusterConfig.RetryTimeout/2)
	defer cancel()
	req := FailsafeRequest{Leader: a.self.Name, Instance: a.instance, HoldMillis: a.clusterConfig.TTL.Milliseconds()}
	var (
		mu        sync.Mutex
		confirmed = map[string]bool{}
		refused   []string
		names     []string
		wg        sync.WaitGroup
	)
	for _, m := range cl.Members {
		if a.gone[m.Name] {
			continue // scaled away: no agent of it can race, or confirm
		}
		names = append(names, m.Name)
		if m.Name == a.self.Name {
			continue
		}
		wg.Go(func() {
			err := fmt.Errorf("no API URL in its member record")
			if m.APIURL != "" {
				err = a.peerFailsafe(cctx, m.APIURL, req)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, m.Name+": "+err.Error())
				return
			}
			confirmed[m.Name] = true
		})
	}
	wg.Wait()
	if missing := failover.FailsafeUnconfirmed(a.self.Name, names, confirmed); len(missing) > 0 {
		a.log.Error("failsafe: not every member confirmed this leader; fencing at the deadline",
			zap.Strings("unconfirmed", missing), zap.Strings("refused", refused))
		a.failsafeActive = false
		a.metrics.FailsafeActive.Set(0)
		return false
	}
	a.setDeadline(start.Add(a.clusterConfig.TTL - a.clusterConfig.SafetyMargin))
	if !a.failsafeActive {
		a.log.Warn("failsafe: the DCS is unreachable, and every member confirmed this leader: staying writable")
		a.labeler.Event(ctx, a.self.Name, eventWarning, "Failsafe", "the DCS is unreachable; every member confirmed this leader")
	}
	a.failsafeActive = true
	a.metrics.FailsafeActive.Set(1)
	return true
}

// dcsReached ends failsafe mode, if it was on, after a DCS call succeeded.
func (a *Agent) dcsReached() {
	if a.failsafeActive {
		a.log.Info("failsafe: the DCS is reachable again")
		a.failsafeActive = false
		a.metrics.FailsafeActive.Set(0)
	}
}

func (a *Agent) serveFailsafe(w http.ResponseWriter, r *http.Request) {
	if a.self.PeerCertRequired && !apitls.PeerVerified(r.TLS) {
		// A confirmation holds this member back from failing over: only a
		// peer that proves it is one may ask for it.
		http.Error(w, "POST /failsafe needs a client certificate signed by --api-tls-ca", http.StatusForbidden)
		return
	}
	var req FailsafeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		http.Error(w, "bad failsafe request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := a.acceptFailsafe(req); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"confirmed": req.Leader})
}
