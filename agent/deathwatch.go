package agent

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// Failover by confirmed death. A follower watches the holder: its
// replication stream (our receiver running against its address) and, once
// the stream is lost, its agent (GET /status). Two proofs of death let the
// best candidate take the lock over without waiting for its ttl
// (failover.decideTakeOver):
//
//   - lossless mode: both have been lost for the confirmation window, and a
//     majority of the members, us included, report the same in their
//     /status (failover decides it from the reports in Snapshot.LeaderLost);
//   - any mode, on Kubernetes: while both are lost, the API server reports
//     every container of the holder's pod (the UID its record names) not
//     running (Snapshot.LeaderPodDown): the kubelet's word, which no
//     network fault between members can fake.
//
// A slow holder keeps its stream, a frozen agent's server keeps streaming
// and its containers keep running, a holder cut off from the network keeps
// its receivers' connections until their timeout: none of these is
// confirmed dead.

// LeaderLost is what a member reports of the holder it lost.
type LeaderLost struct {
	Leader   string `json:"leader"`
	Instance string `json:"instance"`
	// ForSeconds is how long both its stream and its agent had been lost
	// when this status was published.
	ForSeconds float64 `json:"for_seconds"`
}

// deathWatch is the follower's view of the holder it watches; podDown
// says why its pod (podUID) is dead by the kubelet's word ("" until it is).
type deathWatch struct {
	leader, instance string
	lostSince        time.Time
	podDown, podUID  string
}

// deadPod is the former holder whose lock we took on the kubelet's word
// that every container of its pod (uid) had stopped.
type deadPod struct{ member, uid string }

// confirmWindow is how long a holder must stay lost before it counts as
// dead: one loop_wait.
func (a *Agent) confirmWindow() time.Duration { return a.clusterConfig.LoopWait }

// watchLeader updates the watch of the holder in cl, for a follower of a
// valid lock.
func (a *Agent) watchLeader(ctx context.Context, cl *dcs.Cluster, obs mysqlctl.Observation, localErr error) {
	l := cl.Leader
	if l == nil || l.Expired || l.Holder == a.self.Name || l.Holder == dcs.UnknownHolder || localErr != nil {
		a.watch = deathWatch{}
		return
	}
	if a.watch.leader != l.Holder || a.watch.instance != l.Instance {
		a.watch = deathWatch{leader: l.Holder, instance: l.Instance}
	}
	lm, ok := cl.Member(l.Holder)
	if !ok {
		a.watch.lostSince = time.Time{}
		return
	}
	if a.watch.podDown != "" {
		// The kubelet's word stands for this lock's instance: what
		// answers from that pod now (its restarted agent, its restarted
		// read-only mysqld) is not the holder.
		return
	}
	if streaming(obs, lm.MySQLAddr) || a.agentAnswers(ctx, lm, l.Instance) {
		a.watch.lostSince = time.Time{}
		return
	}
	if a.watch.lostSince.IsZero() {
		a.watch.lostSince = a.clock.Now()
		a.log.Warn("lost the leader's replication stream and its agent", zap.String("leader", l.Holder))
	}
	uid := lm.Tags[failover.TagPod]
	if a.watch.podDown = a.podDown(ctx, lm.Name, uid); a.watch.podDown != "" {
		a.watch.podUID = uid
		a.log.Warn("the kubelet reports every container of the leader's pod stopped", zap.String("leader", l.Holder),
			zap.String("containers", a.watch.podDown))
	}
}

// podDown asks the API server, within a quarter of retry_timeout, whether
// every container of member's pod, that UID, is stopped; "" when not, or
// when it cannot tell.
func (a *Agent) podDown(ctx context.Context, member, uid string) string {
	if uid == "" {
		return "" // outside Kubernetes, or an older agent
	}
	cctx, cancel := context.WithTimeout(ctx, a.clusterConfig.RetryTimeout/4)
	defer cancel()
	why, err := a.labeler.PodDown(cctx, member, uid)
	if err != nil {
		a.log.Debug("could not read a member's pod", zap.String("member", member), zap.Error(err))
	}
	return why
}

// deadPeer is, while we promote after taking the lock from a pod the
// kubelet reported stopped, that member as long as the kubelet still
// reports its pod so (asked each iteration); "" otherwise. Its pod's
// network went with it, so a dial of its mysqld would hang for the whole
// probe bound each iteration; no mysqld runs there to answer or to fence.
// A container the kubelet restarts is probed as usual again (a restarted
// mysqld starts read-only, and may hold a tail to catch up from).
func (a *Agent) deadPeer(ctx context.Context) string {
	d := a.tookFromDeadPod
	if d.member == "" || a.podDown(ctx, d.member, d.uid) == "" {
		return ""
	}
	return d.member
}

// streaming reports whether our receiver runs against addr.
func streaming(obs mysqlctl.Observation, addr string) bool {
	r := obs.Replica
	return r != nil && r.IOThread == mysqlctl.ThreadRunning && net.JoinHostPort(r.SourceHost, strconv.Itoa(r.SourcePort)) == addr
}

// agentAnswers asks the holder's agent for its status, within a quarter of
// retry_timeout: it answers only as the lock's instance (an agent of that
// name restarted since is not the holder; an older agent that does not
// say its instance counts).
func (a *Agent) agentAnswers(ctx context.Context, lm dcs.Member, instance string) bool {
	if lm.APIURL == "" {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, a.clusterConfig.RetryTimeout/4)
	defer cancel()
	st, err := a.peerStatus(cctx, lm.APIURL)
	return err == nil && st.Name == lm.Name && (st.Instance == "" || instance == "" || st.Instance == instance)
}

// leaderLost is what /status reports of the watch; nil while the holder
// is not lost.
func (a *Agent) leaderLost() *LeaderLost {
	if a.watch.lostSince.IsZero() {
		return nil
	}
	return &LeaderLost{Leader: a.watch.leader, Instance: a.watch.instance, ForSeconds: a.clock.Since(a.watch.lostSince).Seconds()}
}

// lossReports is what failover decides a confirmed death by: our own
// report of the watched holder and those in the peers' live status.
func (a *Agent) lossReports(live map[string]*MemberStatus) []failover.LossReport {
	var out []failover.LossReport
	if ll := a.leaderLost(); ll != nil {
		out = append(out, lossReport(a.self.Name, ll))
	}
	for name, st := range live {
		if st != nil && st.LeaderLost != nil {
			out = append(out, lossReport(name, st.LeaderLost))
		}
	}
	return out
}

func lossReport(member string, ll *LeaderLost) failover.LossReport {
	return failover.LossReport{Member: member, Leader: ll.Leader, Instance: ll.Instance,
		LostFor: time.Duration(ll.ForSeconds * float64(time.Second))}
}

// takeOver takes the confirmed-dead holder's lock at the version seen.
func (a *Agent) takeOver(ctx context.Context, cl *dcs.Cluster, action failover.Action) bool {
	if cl.Leader == nil {
		return false
	}
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	err := a.store.TakeOverLeader(cctx, cl.Leader.Version, a.clusterConfig.TTL)
	cancel()
	if err != nil {
		a.metrics.dcsFailed(dcsOpTakeOver)
		a.log.Warn("taking over the dead leader's lock failed", zap.Error(err))
		return false
	}
	a.heldFrom(start)
	a.failoverFrom = &failoverStart{from: action.Target, detected: a.watch.lostSince, acquired: start}
	a.metrics.Failovers.Inc()
	if w := a.watch; w.podDown != "" {
		a.tookFromDeadPod = deadPod{member: w.leader, uid: w.podUID}
	}
	a.log.Warn("took over the lock of a leader confirmed dead", zap.String("leader", action.Target))
	a.labeler.Event(ctx, a.self.Name, eventNormal, "LeaderLost", fmt.Sprintf("took over the lock of %q: %s", action.Target, action.Reason))
	a.watch = deathWatch{}
	return true
}
