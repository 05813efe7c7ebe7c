package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/internal/version"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// roleName is a role as /status and the role metric name it: "primary",
// "replica", or "none" for dcs.RoleUnknown (no pod role label).
func roleName(r dcs.Role) string {
	if r == dcs.RoleUnknown {
		return "none"
	}
	return r.String()
}

// MemberStatus is this member as served by GET /status, and as peers read it
// when ranking failover candidates.
type MemberStatus struct {
	Name string `json:"name"`
	// Instance is this agent process's instance id.
	Instance string `json:"instance"`
	// AgentVersion is this agent's build (internal/version).
	AgentVersion string `json:"agent_version"`
	Cluster      string `json:"cluster"`
	Role         string `json:"role"`
	HoldsLock    bool   `json:"holds_lock"`
	// Healthy: the local mysqld answered the last observation.
	Healthy bool `json:"healthy"`
	// MySQLSeen: the local mysqld has answered since this agent started.
	// An agent up before its server (a pod coming back) reports false:
	// peers wait for what its disk holds (failover.Member.StartingUp).
	MySQLSeen     bool   `json:"mysql_seen"`
	Writable      bool   `json:"writable"`
	GTIDExecuted  string `json:"gtid_executed"`
	GTIDRetrieved string `json:"gtid_retrieved,omitempty"`
	Replication   string `json:"replication"`
	Source        string `json:"source,omitempty"`
	LagSeconds    *int64 `json:"lag_seconds,omitempty"` // grows while the receiver does not receive (lag.go)
	Receiver      string `json:"receiver,omitempty"`    // running, connecting (to a lost source) or stopped
	// ReadsOff says why this replica serves no reads (failover.ReadRefusal):
	// /readyz fails, so the read Service leaves it out; "" on a replica
	// that serves them, and on any other member.
	ReadsOff string `json:"reads_off,omitempty"`
	Errant   string `json:"errant,omitempty"`
	// Healing says what self-healing does about this member's data, or
	// waits for (failover.Heal); "" when there is nothing to heal.
	Healing        string  `json:"healing,omitempty"`
	Error          string  `json:"error,omitempty"`
	Action         string  `json:"action"`
	Reason         string  `json:"reason"`
	Leader         string  `json:"leader,omitempty"`
	Paused         bool    `json:"paused"`
	LastLoop       string  `json:"last_loop"`
	SecondsToFence float64 `json:"seconds_to_fence,omitempty"`
	// Duplicate says which other live agent runs with our member name;
	// while it is set this agent refuses to act.
	Duplicate string `json:"duplicate,omitempty"`
	// FailsafePromise names the leader this member promised, within ttl,
	// not to race against (failsafe mode); a candidate that sees it in any
	// peer's status does not race either.
	FailsafePromise string `json:"failsafe_promise,omitempty"`
	// LeaderLost says how long this member has lost the holder's stream
	// and agent (lossless mode); candidates count it towards a majority.
	LeaderLost *LeaderLost `json:"leader_lost,omitempty"`
	// SemiSync is this member's side of semi-synchronous replication; nil
	// when semi_sync is off.
	SemiSync *SemiSyncState `json:"semi_sync,omitempty"`
}

// SemiSyncState is one member's semi-sync state, as /status serves it.
type SemiSyncState struct {
	Mode string `json:"mode"`
	// Primary side: replicas acknowledging now, commits waiting for an
	// acknowledgement, and why writes hang when they do.
	AcknowledgingReplicas int    `json:"acknowledging_replicas"`
	WaitingCommits        int    `json:"waiting_commits"`
	Stalled               string `json:"stalled,omitempty"`
	// Replica side: replicating without acknowledging (ineligible in
	// strict mode).
	Async bool `json:"async,omitempty"`
}

// semiSyncState reads obs as the cluster's semi-sync mode sees it; nil when
// the mode is off or mysqld did not answer.
func (a *Agent) semiSyncState(obs mysqlctl.Observation, localErr error) *SemiSyncState {
	mode := a.clusterConfig.SemiSync
	if mode == dcs.SemiSyncOff || localErr != nil {
		return nil
	}
	ss := obs.Status.SemiSync
	st := &SemiSyncState{Mode: mode.String()}
	if ss.SourceEnabled {
		st.AcknowledgingReplicas, st.WaitingCommits = ss.SourceClients, ss.SourceWaitSessions
		if mode == dcs.SemiSyncStrict && ss.SourceClients == 0 {
			st.Stalled = fmt.Sprintf("no replica acknowledges: writes wait (%d commits waiting)", ss.SourceWaitSessions)
		}
	}
	// Asynchronous: its receiver is not set to acknowledge, or streams
	// without acknowledging. The setting part holds while the source is
	// lost (the receiver retrying), when the live part can no longer tell.
	if r := obs.Replica; r != nil && (!ss.ReplicaEnabled || (r.IOThread == mysqlctl.ThreadRunning && !ss.ReplicaActive)) {
		st.Async = true
	}
	return st
}

func replicationState(obs mysqlctl.Observation, localErr error) dcs.ReplicationState {
	r := obs.Replica
	switch {
	case localErr != nil:
		return dcs.ReplicationUnknown
	case r == nil:
		return dcs.ReplicationNone
	case r.Broken():
		return dcs.ReplicationBroken
	case r.Streaming():
		return dcs.ReplicationRunning
	default:
		return dcs.ReplicationStopped
	}
}

func (a *Agent) publishStatus(obs mysqlctl.Observation, localErr error, cl *dcs.Cluster, action failover.Action) {
	st := MemberStatus{
		Name: a.self.Name, Instance: a.instance, Cluster: a.self.Cluster, Role: roleName(a.role), HoldsLock: a.hasDeadline(),
		Duplicate: a.duplicate,
		Healthy:   localErr == nil, Writable: localErr == nil && obs.Status.Writable(),
		GTIDExecuted: obs.Status.GTIDExecuted, Replication: replicationState(obs, localErr).String(),
		Errant: a.errant, Healing: a.healing.reason, Action: action.Kind.String(), Reason: action.Reason, LastLoop: a.clock.Now().UTC().Format(time.RFC3339Nano),
		SemiSync: a.semiSyncState(obs, localErr), FailsafePromise: a.promisedLeader(), LeaderLost: a.leaderLost(),
	}
	a.metrics.setSemiSync(st.SemiSync)
	a.metrics.RebuildNeeded.Set(boolGauge(st.Healing != ""))
	lag := a.lag.at(a.clock.Now())
	a.metrics.setLocal(obs, localErr, a.errant != "", lag)
	a.metrics.setCluster(cl, a.clusterConfig)
	if localErr != nil {
		st.Error = localErr.Error()
	}
	if lag != nil {
		s := int64(*lag / time.Second)
		st.LagSeconds = &s
	}
	st.Receiver = receiverState(obs, localErr).String()
	st.ReadsOff = a.readRefusal(obs, localErr, lag)
	if r := obs.Replica; r != nil {
		st.GTIDRetrieved = r.RetrievedGTID
		st.Source = fmt.Sprintf("%s:%d", r.SourceHost, r.SourcePort)
	}
	st.GTIDExecuted, st.GTIDRetrieved = a.knownGTIDs(cl, localErr, st.GTIDExecuted, st.GTIDRetrieved)
	a.mysqlSeen = a.mysqlSeen || localErr == nil
	st.MySQLSeen = a.mysqlSeen
	if cl != nil {
		st.Paused = cl.Config.Paused
		if cl.Leader != nil {
			st.Leader = cl.Leader.Holder
		}
	}
	if d := a.effectiveDeadline(); !d.IsZero() {
		st.SecondsToFence = d.Sub(a.clock.Now()).Seconds()
	}
	a.statusMu.Lock()
	a.status = st
	if cl != nil {
		a.cluster = cl
	}
	a.publishFailsafeView(cl)
	a.statusMu.Unlock()
}

// knownGTIDs is what our mysqld last said it holds: what it answers now,
// or, while it does not answer (down, starting, hung), what it answered
// last, seeded at start from our own record. The data on its disk is still
// there, and peers choosing a leader must count it (failover's
// awaitedData): an agent up before its mysqld that published no GTIDs
// would let a less complete member lead after a cold start.
func (a *Agent) knownGTIDs(cl *dcs.Cluster, localErr error, executed, retrieved string) (string, string) {
	switch {
	case localErr == nil:
		a.lastGTIDs = [2]string{executed, retrieved}
	case a.lastGTIDs == [2]string{} && cl != nil:
		if own, ok := cl.Member(a.self.Name); ok {
			a.lastGTIDs = [2]string{own.GTIDExecuted, own.GTIDRetrieved}
		}
	}
	return a.lastGTIDs[0], a.lastGTIDs[1]
}

// Status returns what GET /status serves. The published snapshot may be
// older than the lock deadline (a process frozen past it answers requests
// before its loop runs again), so the lock is judged on the deadline now.
func (a *Agent) Status() MemberStatus {
	a.statusMu.Lock()
	st := a.status
	a.statusMu.Unlock()
	st.Name, st.Instance, st.AgentVersion = a.self.Name, a.instance, version.Get()
	if st.HoldsLock && !a.canWriteFor(0) {
		st.HoldsLock, st.SecondsToFence = false, 0
	}
	return st
}

// publishMember writes our member record; the store skips writes that only
// refresh volatile fields more often than its refresh interval.
func (a *Agent) publishMember(ctx context.Context, cl *dcs.Cluster, obs mysqlctl.Observation, localErr error) {
	st := a.Status()
	lag := a.lag.at(a.clock.Now())
	m := dcs.Member{
		Name: a.self.Name, Instance: a.instance, APIURL: a.self.APIURL, MySQLAddr: a.self.MySQLAddr,
		GTIDExecuted: st.GTIDExecuted, GTIDRetrieved: st.GTIDRetrieved, NoFailover: a.self.NoFailover,
		FailoverPriority: a.self.FailoverPriority, Lag: lag, Role: a.role, AgentVersion: st.AgentVersion,
		Receiver: receiverState(obs, localErr),
	}
	m.Replication = replicationState(obs, localErr)
	if r := obs.Replica; localErr == nil && r != nil && r.Broken() {
		m.ReplicationError = strings.TrimSpace(r.LastSQLError + " " + r.LastIOError)
	}
	m.Tags = map[string]string{}
	if a.errant != "" {
		m.Tags[failover.TagErrant] = a.errant
	}
	if a.self.PodUID != "" {
		m.Tags[failover.TagPod] = a.self.PodUID
	}
	if a.misconfigured != "" {
		m.Tags[failover.TagMisconfigured] = a.misconfigured
	}
	// Tags are written at once when they change, and lag is not: the tag
	// makes a crossing of the promotion limit, either way, visible now.
	if maxLag := a.clusterConfig.MaximumLagOnFailover; maxLag > 0 && lag != nil && *lag > maxLag {
		m.Tags[failover.TagLagging] = "over " + maxLag.String()
	}
	if run := a.rebuild; run != nil {
		// Also after the request is cleared, while a rebuild past its
		// point of no return finishes: nobody may hand over to us.
		m.Tags[failover.TagRebuilding] = "from " + run.donor
	}
	if run := a.restarting; run != nil {
		m.Tags[failover.TagRestarting] = "since " + run.since.UTC().Format(time.TimeOnly)
	}
	if ss := st.SemiSync; ss != nil && ss.Async {
		m.Tags[failover.TagAsync] = "streams without acknowledging"
	}
	a.metrics.Rebuilding.Set(boolGauge(a.rebuild != nil))
	// The record does not say whether our mysqld answers (peers ask our
	// API for that): localErr does.
	a.metrics.FailoverCandidate.Set(boolGauge(localErr == nil && a.role != dcs.RolePrimary &&
		failover.Ineligibility(failover.FromRecord(m), failover.RulesOf(a.clusterConfig)) == ""))
	if a.acknowledgers != nil {
		// Also while our mysqld does not answer (role unknown) and after
		// we gave the lock up: the candidate needs the list of our term,
		// and it marks us as its old primary (failover.unseenAcknowledgers).
		m.Tags[failover.TagAcknowledgers] = failover.FormatAcknowledgers(a.acknowledgers)
	}
	if ss := st.SemiSync; ss != nil && ss.Stalled != "" && a.role == dcs.RolePrimary {
		m.Tags[failover.TagStalled] = "no replica acknowledges"
	}
	if st.ReadsOff != "" {
		m.Tags[failover.TagNoReads] = st.ReadsOff
	}
	if a.clusterConfig.Paused {
		m.Tags[failover.TagPaused] = "yes"
	}
	if a.stopping {
		m.Tags[failover.TagStopped] = "agent stopped at " + a.clock.Now().UTC().Format(time.RFC3339)
	}
	// While failsafe holds, our last renewal found the DCS unreachable: a
	// write would wait out retry_timeout in every iteration, time the next
	// failsafe round needs (each holds the deadline only ttl -
	// safety_margin - retry_timeout ahead). The record is written once the
	// DCS answers.
	if !a.failsafeActive {
		a.writeMember(ctx, m)
	}
	a.updateLagTransactions(cl, st)
}

func (a *Agent) writeMember(ctx context.Context, m dcs.Member) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.UpdateMember(cctx, m); err != nil {
		a.metrics.dcsFailed(dcsOpMember)
		a.log.Warn("publishing the member record failed", zap.Error(err))
	} else {
		a.metrics.dcsSucceeded(a.clock.Now())
	}
}

func (a *Agent) updateLagTransactions(cl *dcs.Cluster, st MemberStatus) {
	if cl == nil || cl.Leader == nil || cl.Leader.Holder == a.self.Name {
		a.metrics.setLagTransactions(0, true)
		return
	}
	lm, ok := cl.Member(cl.Leader.Holder)
	if !ok {
		a.metrics.setLagTransactions(0, false)
		return
	}
	self := failover.Member{Name: a.self.Name, Fresh: true, Healthy: true, Executed: st.GTIDExecuted}
	leader := failover.Member{Name: lm.Name, Fresh: true, Healthy: true, Executed: lm.GTIDExecuted}
	for _, c := range failover.RankCandidates(a.flavor(), []failover.Member{self, leader}, failover.Rules{}) {
		if c.Name == a.self.Name {
			a.metrics.setLagTransactions(c.Missing, true)
		}
	}
}

// setRole records our role and relabels our pod when it changed.
func (a *Agent) setRole(ctx context.Context, r dcs.Role) {
	if r == a.role {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.labeler.SetRole(cctx, a.self.Name, r); err != nil {
		a.log.Warn("relabelling our pod failed", zap.String("role", roleName(r)), zap.Error(err))
		return // retried at the next change of mind or iteration
	}
	a.log.Info("role changed", zap.String("from", roleName(a.role)), zap.String("to", roleName(r)))
	a.role = r
	a.metrics.setRole(r)
	if a.roleChanged != nil {
		a.roleChanged(roleName(r))
	}
	if r == dcs.RoleReplica {
		a.acknowledgers = nil // our term as primary is over
	}
}

// fetchPeers asks every other member's API for its live status, in parallel,
// within half of retry_timeout.
func (a *Agent) fetchPeers(ctx context.Context, cl *dcs.Cluster) map[string]*MemberStatus {
	ctx, cancel := context.WithTimeout(ctx, a.clusterConfig.RetryTimeout/2)
	defer cancel()
	out := map[string]*MemberStatus{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range cl.Members {
		if m.Name == a.self.Name || m.APIURL == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := a.peerStatus(ctx, m.APIURL)
			if err != nil || st.Name != m.Name {
				return
			}
			mu.Lock()
			out[m.Name] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// HTTPPeerStatus returns a PeerStatus that GETs <apiURL>/status with client.
func HTTPPeerStatus(client *http.Client) PeerStatus {
	return func(ctx context.Context, apiURL string) (*MemberStatus, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(apiURL, "/")+"/status", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s/status: %s", apiURL, resp.Status)
		}
		var st MemberStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return nil, fmt.Errorf("GET %s/status: %w", apiURL, err)
		}
		return &st, nil
	}
}
