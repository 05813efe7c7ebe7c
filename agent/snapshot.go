package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// observed is what one iteration saw, handed from observe to act.
type observed struct {
	cl       *dcs.Cluster
	obs      mysqlctl.Observation // our mysqld
	localErr error
	peers    map[string]peerProbe // probed peers, by member name; nil when not probed
}

// trackHang records since when our mysqld neither answers nor refuses.
func (a *Agent) trackHang(err error) {
	switch {
	case err == nil || errors.Is(err, mysqlctl.ErrDown):
		a.localHungSince, a.cannotKill = time.Time{}, false
	case a.localHungSince.IsZero():
		a.localHungSince = a.clock.Now()
	}
}

func (a *Agent) observeLocal(ctx context.Context) (mysqlctl.Observation, error) {
	if a.db == nil {
		err := fmt.Errorf("local mysqld not connected: %w", a.dialErr)
		a.trackHang(err)
		return mysqlctl.Observation{}, err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	obs, err := a.db.Observe(cctx)
	a.trackHang(err)
	if err != nil {
		a.log.Warn("observing local mysqld failed", zap.Error(err))
		return obs, err
	}
	a.pidFile = obs.Status.PIDFile
	a.noteMisconfigured(strings.Join(obs.Status.SourceMisconfigured(), "; "))
	a.lag = a.lag.observed(obs.Replica, a.clock.Now())
	return obs, nil
}

// noteMisconfigured records what our mysqld lacks to serve as a source,
// and says so once when that changes.
func (a *Agent) noteMisconfigured(missing string) {
	if missing == a.misconfigured {
		return
	}
	if missing != "" {
		a.log.Error("mysqld cannot serve replicas, so this member will never be promoted: fix my.cnf and restart it",
			zap.String("misconfigured", missing))
	} else {
		a.log.Info("mysqld settings fixed: this member may be promoted again")
	}
	a.misconfigured = missing
}

// knownLag is the replica's delay, known only while its receiver runs: a
// stopped or reconnecting one reports a stale or no Seconds_Behind_Source.
func knownLag(r *mysqlctl.ReplicaStatus) (time.Duration, bool) {
	if r.SecondsBehind == nil || r.IOThread != mysqlctl.ThreadRunning {
		return 0, false
	}
	return time.Duration(*r.SecondsBehind) * time.Second, true
}

// snapshot assembles what failover.Decide needs. It probes the peers'
// mysqld while we hold the lock (to keep the cluster single-writable, and to
// promote safely), and fills o.peers with what it found.
func (a *Agent) snapshot(ctx context.Context, o *observed, stopping bool) failover.Snapshot {
	cl, obs, localErr := o.cl, o.obs, o.localErr
	now := a.clock.Now()
	s := failover.Snapshot{
		Self: a.self.Name, SelfInstance: a.instance, SelfAddr: a.self.MySQLAddr, Flavor: a.flavor(), Now: now,
		Paused: a.clusterConfig.Paused, ConfigUnknown: cl.ConfigErr != nil && !a.clusterConfigGood,
		Initialized: cl.Initialized != nil, ShuttingDown: stopping, FailedTargets: a.failedTargets,
		Deadline: a.effectiveDeadline(), Grace: a.clusterConfig.LoopWait * 2, DataWait: dcs.DefaultMemberTTL, Rules: failover.RulesOf(a.clusterConfig),
		PromotionTimeout: a.promotionTimeout(),
		LocalUp:          localErr == nil, LocalDown: errors.Is(localErr, mysqlctl.ErrDown),
		LocalHungSince: a.localHungSince, HangTimeout: a.clusterConfig.TTL,
		CanKillLocal: a.killMySQL != nil && a.pidFile != "" && !a.cannotKill,
		FailsafeHeld: a.failsafeActive, FailsafeLeader: a.promisedLeader(),
		LocalWritable: localErr == nil && obs.Status.Writable(),
	}
	if r := obs.Replica; localErr == nil && r != nil {
		s.LocalSource = net.JoinHostPort(r.SourceHost, strconv.Itoa(r.SourcePort))
	}
	if cl.Leader != nil {
		s.Leader, s.LeaderInstance, s.LeaderExpired = cl.Leader.Holder, cl.Leader.Instance, cl.Leader.Expired
	}
	if s.Leader == "" || s.LeaderExpired {
		if a.leaderlessSince.IsZero() {
			a.leaderlessSince = now
		}
	} else {
		a.leaderlessSince = time.Time{}
		if s.Leader != dcs.UnknownHolder {
			a.lastLeader = s.Leader
		}
	}
	s.LeaderlessSince = a.leaderlessSince
	a.lag = a.lag.leader(liveLeaderOther(cl, a.self.Name), leaderLastAlive(cl.Leader, a.clusterConfig.TTL, now), now)
	if own, ok := cl.Member(a.self.Name); ok {
		a.lag = a.lag.seededFrom(&own)
	} else {
		a.lag = a.lag.seededFrom(nil)
	}
	if f := a.failoverFrom; f != nil {
		s.FormerLeader = f.from
	}
	if sw := cl.Switchover; sw != nil && sw.Err == nil {
		s.Switchover = &failover.SwitchoverRequest{From: sw.From, To: sw.To, ScheduledAt: sw.ScheduledAt, Force: sw.Force}
	}
	s.SwitchoverUnreadable = cl.Switchover != nil && cl.Switchover.Err != nil
	s.Duplicate = a.duplicateIdentity(ctx, cl)

	// A lock handed to us counts from the hand-over, before our first
	// renewal: the promotion starts then, and must see the peers.
	holding := s.Leader == a.self.Name && s.LeaderInstance == a.instance && !s.LeaderExpired
	if holding && !(s.LocalWritable && s.LocalSource == "") {
		if a.promotingSince.IsZero() {
			a.promotingSince = now
		}
	} else {
		a.promotingSince = time.Time{}
		a.tookFromDeadPod = deadPod{}
	}
	s.PromotingSince = a.promotingSince

	self := a.selfMember(obs, localErr)
	if now.Before(a.standDownUntil) {
		self.Hold = "it gave the lock up to a better member moments ago"
	}
	s.Members = append(s.Members, self)
	// Peers' live status matters when choosing who takes over, or whether
	// to unfence; otherwise their records suffice.
	promoting := !s.PromotingSince.IsZero()
	a.watchLeader(ctx, cl, obs, localErr)
	// A holder lost for the confirmation window: ask the peers whether
	// they lost it too.
	suspect := !a.watch.lostSince.IsZero() && a.clock.Since(a.watch.lostSince) >= a.confirmWindow()
	wantPeers := s.Leader == "" || s.LeaderExpired || s.Switchover != nil || stopping || promoting || suspect
	// The agents' status over HTTP and, while we hold the lock, every
	// peer's mysqld, both at once: a promotion waits up to retry_timeout
	// for a probe's answer; a running primary's check for writable peers is
	// best effort each iteration, on a short bound so that a hung peer does
	// not delay the renewal that follows.
	var (
		live    map[string]*MemberStatus
		fetched sync.WaitGroup
	)
	dead := a.deadPeer(ctx)
	reachable := withoutMember(cl, dead)
	if wantPeers {
		fetched.Go(func() { live = a.fetchPeers(ctx, reachable) })
	}
	if holding && localErr == nil {
		bound := a.clusterConfig.RetryTimeout / 4
		if promoting {
			bound = a.clusterConfig.RetryTimeout
		}
		o.peers = a.probePeers(ctx, reachable, bound)
		if dead != "" {
			o.peers[dead] = peerProbe{down: true} // by the kubelet's word
		}
	}
	fetched.Wait()
	if suspect {
		s.LeaderLost, s.ConfirmWindow = a.lossReports(live), a.confirmWindow()
	}
	if w := a.watch; w.podDown != "" && w.leader == s.Leader && w.instance == s.LeaderInstance {
		s.LeaderPodDown = w.podDown
	}
	for _, st := range live {
		// A member that joined after the leader lost the DCS is not in its
		// member set and gets no failsafe request: the others' promises
		// hold it back too.
		if st != nil && s.FailsafeLeader == "" && st.FailsafePromise != a.self.Name {
			s.FailsafeLeader = st.FailsafePromise
		}
	}
	for _, m := range cl.Members {
		if m.Name == a.self.Name {
			continue
		}
		fm := toCandidate(m, live, wantPeers)
		fm.Removed = a.removed(ctx, m)
		fm.Rebuilding = fm.Rebuilding || cl.ReinitPending(m.Name)
		fm.Restarting = fm.Restarting || cl.RestartPending(m.Name)
		if p, ok := o.peers[m.Name]; ok {
			fm.Observed, fm.Reachable, fm.Down = true, p.reachable, p.down
			if p.reachable {
				// It answered us just now, whatever its agent last saw.
				fm.Healthy = true
				fm.Writable, fm.PullingFrom = p.obs.Status.Writable(), pullingFrom(p.obs)
				fm.Executed, fm.BinlogState = p.obs.Status.GTIDExecuted, p.obs.Status.GTIDBinlogState
				fm.Retrieved, fm.ReplicationBroken = "", false
				if r := p.obs.Replica; r != nil {
					fm.Retrieved, fm.ReplicationBroken = r.RetrievedGTID, r.Broken()
				}
				fm.Misconfigured = strings.Join(p.obs.Status.SourceMisconfigured(), "; ")
			}
		}
		s.Members = append(s.Members, fm)
	}
	return s
}

// withoutMember is cl without that member ("" none), for the calls that
// should not try to reach it.
func withoutMember(cl *dcs.Cluster, name string) *dcs.Cluster {
	if name == "" {
		return cl
	}
	c := *cl
	c.Members = slices.DeleteFunc(slices.Clone(cl.Members), func(m dcs.Member) bool { return m.Name == name })
	return &c
}

// removed reports a member whose record is stale and whose pod the API
// server says does not exist (failover.Member.Removed): a StatefulSet
// scaled down leaves such records behind, and without this each would hold
// every lossless promotion and every failsafe hold for good. The answer is
// remembered (gone) for failsafe mode, which cannot ask while the DCS is
// unreachable, and asked again at most every member refresh; a record that
// is fresh again (the member is back) clears it.
func (a *Agent) removed(ctx context.Context, m dcs.Member) bool {
	if !m.Stale {
		delete(a.gone, m.Name)
		delete(a.goneAsked, m.Name)
		return false
	}
	if a.failsafeActive {
		// The API server is unreachable: asking would only wait out
		// retry_timeout, time the next failsafe round needs.
		return a.gone[m.Name]
	}
	now := a.clock.Now()
	if asked, ok := a.goneAsked[m.Name]; ok && now.Sub(asked) < dcs.DefaultMemberRefresh {
		return a.gone[m.Name]
	}
	a.goneAsked[m.Name] = now
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	gone, err := a.labeler.PodGone(cctx, m.Name)
	switch {
	case err != nil:
		a.log.Debug("could not tell whether a stale member's pod exists", zap.String("member", m.Name), zap.Error(err))
	case gone && !a.gone[m.Name]:
		a.log.Info("a member's record is stale and its pod does not exist: it no longer counts as an acknowledger or for failsafe; `agentctl remove` deletes the record",
			zap.String("member", m.Name))
		a.gone[m.Name] = true
	case !gone:
		delete(a.gone, m.Name)
	}
	return a.gone[m.Name]
}

// promotionTimeout bounds how long a holder may stay unable to become
// writable (say, a relay log that never finishes applying) before it gives
// the lock up: long enough to apply the largest backlog a candidate may
// have (maximum_lag_on_failover), with room to spare.
func (a *Agent) promotionTimeout() time.Duration {
	return max(time.Minute, 2*a.clusterConfig.MaximumLagOnFailover+a.clusterConfig.TTL)
}

func (a *Agent) selfMember(obs mysqlctl.Observation, localErr error) failover.Member {
	m := failover.Member{
		Name: a.self.Name, Fresh: true, Healthy: localErr == nil, NoFailover: a.self.NoFailover,
		Priority: a.self.FailoverPriority, Errant: a.errant != "", Executed: obs.Status.GTIDExecuted, Lag: a.lag.at(a.clock.Now()),
		Misconfigured: a.misconfigured, BinlogState: obs.Status.GTIDBinlogState,
	}
	if r := obs.Replica; r != nil {
		m.Retrieved = r.RetrievedGTID
		m.ReplicationBroken = r.Broken()
	}
	if ss := a.semiSyncState(obs, localErr); ss != nil {
		m.Async = ss.Async
	}
	return m
}

// toCandidate turns a member record (failover.FromRecord) and, when
// fetched, its live status into what failover ranks: the live status
// overrides the record's health, errant flag, GTIDs and replication state.
// A peer asked over HTTP that did not answer is stale.
func toCandidate(m dcs.Member, live map[string]*MemberStatus, asked bool) failover.Member {
	fm := failover.FromRecord(m)
	if !asked || m.APIURL == "" {
		return fm
	}
	st, ok := live[m.Name]
	if !ok || st == nil {
		fm.Fresh = false
		return fm
	}
	fm.Healthy, fm.StartingUp = st.Healthy, !st.MySQLSeen
	fm.Errant, fm.ErrantGTIDs = st.Errant != "", st.Errant
	if st.GTIDExecuted != "" || st.Healthy {
		// An agent answering before its first iteration knows no GTIDs
		// yet: its record's still say what its disk holds.
		fm.Executed, fm.Retrieved = st.GTIDExecuted, st.GTIDRetrieved
	}
	fm.ReplicationBroken = st.Replication == dcs.ReplicationBroken.String()
	fm.Async = st.SemiSync != nil && st.SemiSync.Async
	return fm
}
