package failover

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Kind is what the agent does in one loop iteration.
type Kind int

const (
	// Idle: nothing to change (paused, or not eligible while leaderless).
	Idle Kind = iota
	// FenceSelf: make the local mysqld read-only and kill its clients now;
	// the lock may no longer be ours, or was never ours.
	FenceSelf
	// ReleaseLock: give the lock up so a healthy member takes over without
	// waiting for ttl (our mysqld is down, or another member should lead).
	ReleaseLock
	// Bootstrap: race for the lock of an uninitialised cluster (or, holding
	// it, finish recording the cluster's identity), then become the first
	// primary.
	Bootstrap
	// Acquire: race for a lost leader's lock; promotion follows.
	Acquire
	// WaitForBetter: leaderless, but a better candidate races first.
	WaitForBetter
	// Lead: renew the lock and keep the running primary's settings right,
	// fencing any other member that is writable (Action.Fence).
	Lead
	// Promote: renew the lock and run the promotion steps; mysqld becomes
	// writable only when Action.Unfence says so, and only once the renewal
	// has returned (the steps before it may run while it is in flight).
	Promote
	// Follow: be a read-only replica of Target (the lock holder).
	Follow
	// Switchover: hand the lock to Target in a planned, lossless hand-over.
	Switchover
	// RejectSwitchover: the pending request cannot be carried out; clear it.
	RejectSwitchover
	// ClearRequest: the pending request is fulfilled (we lead as asked).
	ClearRequest
	// Refuse: another live agent runs with our member name; stay fenced and
	// do nothing else, so the real member is never displaced.
	Refuse
	// KillLocal: our mysqld hangs and we lead; kill its process, so that it
	// can take no more writes, and release the lock once it is gone.
	KillLocal
	// TakeOver: lossless mode, the holder (Target) confirmed dead: take its
	// still valid lock in one compare-and-set; promotion follows.
	TakeOver
)

var kindNames = [...]string{"idle", "fence-self", "release-lock", "bootstrap", "acquire", "wait-for-better",
	"lead", "promote", "follow", "switchover", "reject-switchover", "clear-request", "refuse", "kill-local", "take-over"}

func (k Kind) String() string {
	if int(k) >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Action is the decision of one iteration.
type Action struct {
	Kind Kind
	// Target is the member to follow, or to hand the lock to (or, with
	// RejectSwitchover, the target refused, when there is one).
	Target string
	// Reason explains the decision, for logs and events.
	Reason string
	// RenewOnly (with Lead): keep the lock but change nothing on mysqld.
	// DecideAgain (with RenewOnly): the lock was held without a renewal of
	// ours; once renewed it is ours to write under, so decide again at
	// once rather than a loop_wait later.
	RenewOnly, DecideAgain bool
	// Fence (Lead, Promote) lists other members whose mysqld answered
	// writable: fence them. A promotion whose fence fails stops there.
	Fence []string
	// StopReceivers (Promote) lists members still pulling from another
	// source: stop their receivers, so an old semi-sync source can
	// acknowledge nothing more.
	StopReceivers []string
	// Unfence (Promote): every check passed, become writable now.
	Unfence bool
	// CatchUpFrom (Promote) names a reachable, fenced member that holds
	// transactions we lack although it may not lead: replicate from it
	// until we hold CatchUpTo (its history, in the flavor's syntax), then
	// decide again.
	CatchUpFrom, CatchUpTo string
	// Unverified (Promote) lists members whose mysqld could not be reached:
	// their agents' own deadline self-fence is what keeps them read-only.
	Unverified []string
	// StandDown (ReleaseLock): another member should lead; do not race for
	// the lock again for a while.
	StandDown bool
	// Unfenced (ReleaseLock): give the lock up although our mysqld could
	// not be fenced: it hangs, and lossless mode keeps it from
	// acknowledging anything once resumed.
	Unfenced bool
}

// SwitchoverRequest is a pending planned hand-over.
type SwitchoverRequest struct {
	// From is the leader it applies to; "" for whoever leads.
	From string
	// To is the requested new leader; "" for the best candidate.
	To          string
	ScheduledAt time.Time
	// Force lets a manual failover target take over although it lags or
	// has errant transactions; on a switchover (From set), it lets the
	// leader stop writes for a target further behind than
	// SwitchoverMaxBehind and wait for it (agentctl switchover --allow-lag).
	Force bool
}

// Snapshot is everything one decision depends on.
type Snapshot struct {
	Self string
	// SelfInstance is this agent process's instance id; the lock is ours
	// only when it names both Self and SelfInstance.
	SelfInstance string
	// SelfAddr is our mysqld's address as peers replicate from it.
	SelfAddr string
	Flavor   gtid.Flavor
	// Now is the agent's clock, the only clock decisions compare with.
	Now time.Time

	Paused bool
	// ConfigUnknown: the stored cluster config cannot be read and this
	// agent has no good copy of it, so it cannot know whether the cluster
	// is paused: it changes nothing, as if paused.
	ConfigUnknown bool
	Initialized   bool
	// ShuttingDown: the agent is stopping (SIGTERM); a holder hands over.
	ShuttingDown bool
	// FailedTargets are the members a hand-over of this shutdown could not
	// complete with (they did not catch up in time): the next attempt
	// tries the next best.
	FailedTargets []string

	// Leader and LeaderInstance name the lock holder; Leader is "" when
	// nobody holds it. LeaderExpired reports the backend's expiry rule on
	// our clock.
	Leader         string
	LeaderInstance string
	LeaderExpired  bool
	// FailsafeHeld: the DCS is unreachable, and every member confirmed over
	// HTTP, within ttl, that it sees us as the leader and will not race
	// (failsafe mode): our lock stays ours although our view of it has
	// expired. FailsafeLeader names a leader that asked us for such a
	// confirmation within ttl, or one that a live peer promised: we do not
	// race while it lasts.
	FailsafeHeld   bool
	FailsafeLeader string
	// LeaderLost holds the reports of the members, us included, that lost
	// both the holder's agent and its replication stream (lossless mode
	// only takes them into account): a majority lost for ConfirmWindow
	// confirms the holder dead (leaderConfirmedDead).
	LeaderLost    []LossReport
	ConfirmWindow time.Duration
	// LeaderPodDown says why the holder (that instance) is dead by the
	// kubelet's word: we lost its agent and its stream, and the API server
	// reports every container of its pod (the UID its record names) not
	// running. "" otherwise.
	LeaderPodDown string
	// FormerLeader is the leader we took the lock over from (failover), ""
	// otherwise. Its data may be ahead of ours, but it is not a candidate.
	FormerLeader string
	// Deadline is when our hold on the lock ends, computed from the start of
	// the last successful renewal (start + ttl - safety margin). Zero when we
	// have not renewed since we (re)started or fenced.
	Deadline time.Time
	// LeaderlessSince is when this agent first saw no valid leader; zero
	// while there is one.
	LeaderlessSince time.Time
	// Grace is how long a member that is not the best candidate waits before
	// it races too, in case the best one is dead.
	Grace time.Duration
	// DataWait bounds how long, leaderless, we wait for a member we cannot
	// read now whose recent record holds transactions we lack
	// (awaitedData); 0 waits for none.
	DataWait time.Duration
	// Rules make members ineligible: maximum_lag_on_failover, lossless mode.
	Rules Rules
	// PromotingSince is when we started holding the lock without being
	// writable; PromotionTimeout bounds that: after it we give the lock up
	// rather than keep the cluster without a writable primary. 0: no bound.
	PromotingSince   time.Time
	PromotionTimeout time.Duration

	// Duplicate is non-empty when another live agent instance publishes a
	// member record with our name; it says which.
	Duplicate string

	// LocalUp: our mysqld answered this iteration.
	LocalUp bool
	// LocalDown: our mysqld is provably not running (connection refused),
	// so it can take no writes. A mysqld that merely does not answer may be
	// hung and resume writable: its holder keeps the lock, since it cannot
	// fence it, and giving the lock up would let another member promote
	// next to it.
	LocalDown bool
	// LocalHungSince is when our mysqld first failed to answer without
	// refusing (it may be hung); zero while it answers or is down.
	// HangTimeout is how long a holder tolerates that before it acts (0:
	// never); CanKillLocal says its process can be killed from here.
	LocalHungSince time.Time
	HangTimeout    time.Duration
	CanKillLocal   bool
	// LocalWritable: our mysqld accepts writes from ordinary clients.
	LocalWritable bool
	// LocalSource is the address our mysqld replicates from; "" when it has
	// no replication configured.
	LocalSource string
	// Members are all members, ourselves included, as known now.
	Members []Member

	Switchover *SwitchoverRequest
	// SwitchoverUnreadable: a switchover record exists but cannot be read;
	// the leader clears it.
	SwitchoverUnreadable bool
}

func (s Snapshot) holdsLock() bool {
	return s.Leader == s.Self && s.LeaderInstance == s.SelfInstance && (!s.LeaderExpired || s.FailsafeHeld)
}

func (s Snapshot) leaderless() bool { return s.Leader == "" || s.LeaderExpired }

// Decide returns the one action to take now. It is a pure function.
func Decide(s Snapshot) Action {
	if !s.Deadline.IsZero() {
		// We believe we may write. A holder past its own deadline may
		// already have been replaced (a frozen agent waking up lands here);
		// one whose lock vanished or names someone else has been. Fence
		// before anything else. The agent clears Deadline once fenced.
		if !s.Now.Before(s.Deadline) {
			return Action{Kind: FenceSelf, Reason: "lock deadline passed without a successful renewal"}
		}
		if !s.holdsLock() {
			return Action{Kind: FenceSelf, Reason: "the lock is no longer ours: " + s.lockState()}
		}
	}
	if s.Rules.IsFenced(s.Self) {
		// An operator fenced us (agentctl fence): read-only until unfenced,
		// whatever else holds. A leader gives the lock up (its release
		// fences first), unless paused: then it keeps it, read-only.
		if s.holdsLock() && !s.Paused {
			return Action{Kind: ReleaseLock, StandDown: true, Reason: "fenced by an operator (agentctl fence): giving up the lock"}
		}
		if s.LocalWritable {
			return Action{Kind: FenceSelf, Reason: "fenced by an operator (agentctl fence)"}
		}
		if s.holdsLock() {
			return Action{Kind: Lead, RenewOnly: true, Reason: "keep the lock, read-only: fenced by an operator, and the cluster is paused"}
		}
	}
	if s.Duplicate != "" && !s.holdsLock() {
		return Action{Kind: Refuse, Reason: "refuse: duplicate identity: " + s.Duplicate}
	}
	if !s.LocalUp {
		if s.holdsLock() && !s.Paused && s.LocalDown {
			return Action{Kind: ReleaseLock, Reason: "local mysqld is down"}
		}
		if s.holdsLock() && !s.Paused {
			return decideHung(s)
		}
		return Action{Kind: Idle, Reason: "local mysqld is down"}
	}
	if s.Paused || s.ConfigUnknown {
		why := "cluster paused"
		if s.ConfigUnknown {
			why = "stored cluster config unreadable, and no good copy of it: as if paused"
		}
		if s.holdsLock() {
			return Action{Kind: Lead, RenewOnly: true, Reason: "keep the lock: " + why + ": change nothing"}
		}
		return Action{Kind: Idle, Reason: why}
	}
	if s.holdsLock() {
		if s.Deadline.IsZero() {
			// Handed to us, or held from before a self-fence: nobody else
			// may take a valid lock, so renewing is safe, but writing waits
			// for a deadline of our own. A promotion may start meanwhile:
			// the agent unfences only once its renewal has returned.
			if s.Initialized && !s.ShuttingDown {
				if a := decideAsLeader(s); a.Kind == Promote {
					return a
				}
			}
			return Action{Kind: Lead, RenewOnly: true, DecideAgain: true, Reason: "keep the lock: held without a renewal of ours: renew before writing"}
		}
		if !s.Initialized {
			return Action{Kind: Bootstrap, Reason: "holding the lock of a cluster whose identity is not recorded yet"}
		}
		return decideAsLeader(s)
	}
	if s.LocalWritable {
		return Action{Kind: FenceSelf, Reason: "writable without the lock"}
	}
	if s.Leader == s.Self && !s.LeaderExpired {
		return Action{Kind: Idle, Reason: "the lock names this member with another agent instance (" + s.LeaderInstance +
			"): a previous run of this agent, or another agent with our name; waiting for it to expire"}
	}
	if s.leaderless() {
		if s.FailsafeLeader != "" && s.FailsafeLeader != s.Self {
			return Action{Kind: Follow, Target: s.FailsafeLeader, Reason: "failsafe: " + s.FailsafeLeader +
				" leads while the DCS is unreachable, and we promised not to race"}
		}
		return decideLeaderless(s)
	}
	if s.Initialized && (s.LeaderPodDown != "" || s.Rules.Lossless && s.leaderConfirmedDead()) {
		if s.FailsafeLeader != "" && s.FailsafeLeader != s.Self {
			// We promised a leader, maybe this holder cut from the DCS and
			// from its replicas' streams, not to race: it stays writable on
			// that promise until it lapses.
			return Action{Kind: Follow, Target: s.Leader, Reason: "leader confirmed dead, but we promised " + s.FailsafeLeader +
				" not to race while the DCS is unreachable (failsafe)"}
		}
		why := "the leader's agent and replication stream are lost, as a majority confirms"
		if s.LeaderPodDown != "" {
			why = "the leader's agent and stream are lost, and the kubelet reports its pod's containers stopped (" + s.LeaderPodDown + ")"
		}
		return decideTakeOver(s, why)
	}
	return Action{Kind: Follow, Target: s.Leader, Reason: "following the lock holder"}
}

// decideTakeOver: the holder is confirmed dead, so the best candidate may
// take the lock without waiting for its ttl; others follow on, and take
// over by the usual race at the ttl if it does not. Two proofs count:
//
//   - lossless mode, a majority lost its agent and its stream: its old
//     server can acknowledge nothing without a replica's acknowledgement
//     (their streams are lost, and the promotion stops every receiver),
//     and its agent, if it lives after all, fences when its next renewal
//     fails;
//   - any mode, the kubelet reports every container of its pod stopped
//     (LeaderPodDown): no mysqld of it takes writes, and no agent of it
//     renews the lock. A restarted mysqld starts read-only (my.cnf), and
//     only a lock holder unfences; its restarted agent is a new instance,
//     which does not hold the lock. A slow or frozen primary's containers
//     still run, so it is never taken over this way.
func decideTakeOver(s Snapshot, why string) Action {
	self, ok := find(s.Members, s.Self)
	if !ok {
		return Action{Kind: Follow, Target: s.Leader, Reason: "leader confirmed dead, but our own member record is not published yet"}
	}
	if why := Ineligibility(self, s.Rules); why != "" {
		return Action{Kind: Follow, Target: s.Leader, Reason: "leader confirmed dead, but we may not take over: " + why}
	}
	var contenders []Member
	for _, m := range s.Members {
		if m.Name != s.Leader {
			contenders = append(contenders, m)
		}
	}
	ranked := RankCandidates(s.Flavor, contenders, s.Rules)
	if len(ranked) == 0 || ranked[0].Name != s.Self {
		best := "nobody"
		if len(ranked) > 0 {
			best = ranked[0].Name
		}
		return Action{Kind: Follow, Target: s.Leader, Reason: "leader confirmed dead; " + best + " is the better candidate"}
	}
	return Action{Kind: TakeOver, Target: s.Leader, Reason: why + ": taking its lock over before its ttl"}
}

// decideHung is the holder's decision while its mysqld neither answers nor
// refuses: it may be hung and resume writable, so giving the lock up would
// let another member promote next to it. Past HangTimeout, it kills it if
// it can; in lossless mode it may give the lock up anyway, since a resumed
// server collects no acknowledgement once the new primary has stopped every
// receiver, and so acknowledges no write.
func decideHung(s Snapshot) Action {
	hung := time.Duration(0)
	if !s.LocalHungSince.IsZero() {
		hung = s.Now.Sub(s.LocalHungSince)
	}
	if s.HangTimeout > 0 && hung >= s.HangTimeout {
		switch {
		case s.CanKillLocal:
			return Action{Kind: KillLocal, Reason: fmt.Sprintf("local mysqld hung for %s: kill it, then release the lock", hung)}
		case s.Rules.Lossless:
			return Action{Kind: ReleaseLock, Unfenced: true, Reason: fmt.Sprintf("local mysqld hung for %s: releasing the lock unfenced "+
				"(lossless: once resumed it cannot acknowledge a write)", hung)}
		}
	}
	return Action{Kind: Lead, RenewOnly: true, Reason: "keep the lock: local mysqld does not answer and may resume writable"}
}

func (s Snapshot) lockState() string {
	switch {
	case s.Leader == "":
		return "nobody holds it"
	case s.LeaderExpired:
		return "it expired"
	case s.Leader == s.Self:
		return fmt.Sprintf("it names our member with another agent instance %q", s.LeaderInstance)
	}
	return "held by " + s.Leader
}

func decideAsLeader(s Snapshot) Action {
	if s.ShuttingDown {
		if best := bestOther(s); best != "" {
			return Action{Kind: Switchover, Target: best, Reason: "agent stopping: hand over to the best replica"}
		}
		return Action{Kind: ReleaseLock, Reason: "agent stopping and no replica can take over" + whyNoneEligible(s)}
	}
	if s.SwitchoverUnreadable {
		return Action{Kind: RejectSwitchover, Reason: "the stored switchover request is unreadable"}
	}
	if !s.LocalWritable || s.LocalSource != "" {
		return decidePromotion(s)
	}
	lead := Action{Kind: Lead, Reason: "holding the lock", Fence: s.writableOthers()}
	if len(lead.Fence) > 0 {
		lead.Reason = "writable without the lock: fencing " + strings.Join(lead.Fence, ", ")
	}
	sw := s.Switchover
	if sw == nil || (sw.From != "" && sw.From != s.Self) || s.Now.Before(sw.ScheduledAt) {
		return lead
	}
	if sw.To == s.Self {
		if sw.From == "" {
			return Action{Kind: ClearRequest, Reason: "manual failover to us is complete", Fence: lead.Fence}
		}
		return Action{Kind: RejectSwitchover, Reason: fmt.Sprintf("switchover target %s is already the leader", sw.To)}
	}
	if sw.To != "" {
		m, ok := find(s.Members, sw.To)
		if !ok {
			return Action{Kind: RejectSwitchover, Reason: fmt.Sprintf("switchover target %s is not a member", sw.To)}
		}
		if why := Ineligibility(m, s.Rules); why != "" {
			return Action{Kind: RejectSwitchover, Reason: fmt.Sprintf("switchover target %s is not eligible: %s", sw.To, why)}
		}
		// Checked before any fence: a refusal stops no write.
		if why := switchoverBlocked(s, m, sw.Force); why != "" {
			return Action{Kind: RejectSwitchover, Target: sw.To, Reason: why}
		}
		return Action{Kind: Switchover, Target: sw.To, Reason: "switchover requested"}
	}
	if best := bestOther(s); best != "" {
		m, _ := find(s.Members, best)
		if why := switchoverBlocked(s, m, sw.Force); why != "" {
			return Action{Kind: RejectSwitchover, Target: best, Reason: why}
		}
		return Action{Kind: Switchover, Target: best, Reason: "switchover requested to the best replica"}
	}
	return Action{Kind: RejectSwitchover, Reason: "switchover requested but no replica is eligible"}
}

// decidePromotion is the leader's decision while its mysqld is not yet a
// writable primary. It unfences only when no other member answers writable,
// no receiver still pulls from another source that may take writes, and no
// reachable eligible member holds transactions we lack.
func decidePromotion(s Snapshot) Action {
	var stop, unverified []string
	for _, m := range s.Members {
		switch {
		case m.Name == s.Self || !m.Observed || m.Removed: // a member scaled away runs no mysqld to fence
		case m.Reachable && m.PullingFrom != "" && m.PullingFrom != s.SelfAddr && !s.fencedSource(m.PullingFrom):
			stop = append(stop, m.Name)
		case !m.Reachable && !m.Down:
			unverified = append(unverified, m.Name)
		}
	}
	if fence := s.writableOthers(); len(fence) > 0 || len(stop) > 0 {
		a := Action{Kind: Promote, Fence: fence, StopReceivers: stop, Reason: "promoting: stopping receivers of " + strings.Join(stop, ", ")}
		if len(fence) > 0 {
			a.Reason = "stop promotion: old source unfenced: fencing " + strings.Join(fence, ", ") + " first"
		}
		return a
	}
	if s.PromotionTimeout > 0 && !s.PromotingSince.IsZero() && s.Now.Sub(s.PromotingSince) >= s.PromotionTimeout {
		return Action{Kind: ReleaseLock, StandDown: true, Reason: fmt.Sprintf("could not become writable within %s of taking the lock", s.PromotionTimeout)}
	}
	forced := s.Switchover != nil && s.Switchover.From == "" && s.Switchover.To == s.Self && s.Switchover.Force
	if better := s.betterPeer(); better != "" && !forced {
		return Action{Kind: ReleaseLock, Target: better, StandDown: true, Reason: "not unfencing: " + better + " holds transactions we lack; let it take over"}
	}
	if !forced {
		if missing := s.dataGap(); missing.from != "" {
			return Action{Kind: Promote, CatchUpFrom: missing.from, CatchUpTo: missing.upTo, Reason: "not unfencing yet: " + missing.why}
		} else if missing.why != "" {
			return Action{Kind: Promote, Reason: "not unfencing: " + missing.why}
		}
	}
	if unseen := s.unseenAcknowledgers(); len(unseen) > 0 && !forced {
		return Action{Kind: Promote, Reason: "lossless: not unfencing before " + strings.Join(unseen, ", ") +
			" answers: it may hold acknowledged transactions we lack"}
	}
	a := Action{Kind: Promote, Unfence: true, Unverified: unverified, Reason: "promoting"}
	if len(unverified) > 0 {
		a.Reason = "promoting; unreachable, so relying on their own deadline self-fence: " + strings.Join(unverified, ", ")
	}
	return a
}

// gap is what a promoting holder must still fetch before it unfences:
// from names the member to replicate from and upTo the history to wait
// for; why says what is missing, or why it cannot be fetched when from is "".
type gap struct{ from, upTo, why string }

// dataGap applies "data before eligibility": eligibility says who may lead,
// never whose data counts. Every reachable member, whatever keeps it from
// leading (nofailover, a broken SQL thread, an errant or misconfigured
// server, a silent agent, the old primary), may hold transactions no other
// member has: in lossless mode it may be a write's only acknowledger. So
// the holder first takes them from it, by replicating from it (it answered
// read-only: its history is final once its receiver is stopped), or does
// not unfence. What it cannot fetch blocks the unfence: transactions only
// in the relay log of a member whose SQL thread is broken, a member
// without a binary log to serve them from, or an errant member's
// legitimate transactions, which cannot be fetched without its errant
// ones (the errant transactions themselves never count). The promotion
// bound then gives the lock up, and the reason says what a person must fix
// (or accept, with a forced manual failover).
//
// Members we could not read are not judged here: unseenAcknowledgers
// covers them in lossless mode, and their own agents' deadline self-fence
// keeps them read-only.
func (s Snapshot) dataGap() gap {
	self, ok := find(s.Members, s.Self)
	if !ok {
		return gap{}
	}
	ours, err := gtid.ParseHistory(s.Flavor, self.Executed, self.Retrieved)
	if err != nil {
		return gap{why: "our GTID history cannot be read: " + err.Error()}
	}
	if src, ok := s.fencedMember(s.LocalSource); ok {
		// The promotion's first step takes all of a fenced source's
		// binary log before it unfences: count it as ours.
		if executed, err := gtid.ParseHistory(s.Flavor, src.Executed, ""); err == nil {
			ours = ours.Union(executed)
		}
	}
	var (
		fetch   gap
		most    uint64
		blocked []string
	)
	for _, m := range s.Members {
		if m.Name == s.Self || !m.Observed || !m.Reachable || (m.Errant && m.ErrantGTIDs == "") {
			continue // an errant member whose errant set is unknown proves nothing
		}
		held, served, err := s.fetchable(m)
		if err != nil {
			blocked = append(blocked, fmt.Sprintf("%s's GTIDs cannot be read (%v)", m.Name, err))
			continue
		}
		missing := ours.Missing(held)
		if missing == 0 {
			if forked := forkedFrom(s.Flavor, self, m); forked != "" && s.Rules.Lossless {
				blocked = append(blocked, fmt.Sprintf("%s holds %s, which we lack although our position is not behind: "+
					"our histories forked, and it cannot be fetched by replication (an old primary's tail, ours or its, "+
					"must go first)", m.Name, forked))
			}
			continue
		}
		switch {
		case m.Errant:
			blocked = append(blocked, fmt.Sprintf("%s holds %d transactions we lack besides its errant ones, "+
				"and replicating from it would copy those too", m.Name, missing))
			continue
		case m.Misconfigured != "":
			blocked = append(blocked, fmt.Sprintf("%s holds %d transactions we lack but cannot serve them (%s)",
				m.Name, missing, m.Misconfigured))
			continue
		}
		if n := ours.Union(served).Missing(held); n > 0 {
			blocked = append(blocked, fmt.Sprintf("%s holds %d transactions we lack only in its relay log, "+
				"and its replication is broken: fix its SQL thread so that it applies them", m.Name, n))
		}
		n := ours.Missing(served)
		if n == 0 || n < most || (n == most && m.Name > fetch.from) {
			continue
		}
		most = n
		fetch = gap{from: m.Name, upTo: served.String(), why: fmt.Sprintf("taking the %d transactions %s holds and we lack first", n, m.Name)}
	}
	if len(blocked) > 0 {
		fetch.why = strings.Join(blocked, "; ")
	}
	return fetch
}

// forkedFrom (MariaDB) lists the transactions of m's binary log that our
// history lacks although its position is not ahead of ours: the two
// histories forked (an old primary kept a tail of writes nobody
// acknowledged, while a new primary wrote the same seq_nos), so comparing
// positions would take one branch for the other's future. m's own errant
// transactions do not count. "" when both binlog states are not known.
// Only lossless mode stops on it: there the branch with the acknowledged
// writes must win, and the one holding a tail nobody acknowledged waits
// (for the tail to be truncated, or a person). In asynchronous mode one
// branch's writes are lost either way, and waiting would keep the cluster
// without a primary.
func forkedFrom(flavor gtid.Flavor, self, m Member) string {
	if flavor != gtid.MariaDB || self.BinlogState == "" || m.BinlogState == "" {
		return ""
	}
	lacking, err := gtid.ErrantMariaDBState(m.BinlogState, self.BinlogState)
	if err != nil || lacking == "" {
		return ""
	}
	var out []string
	for _, g := range strings.Split(lacking, ",") {
		if !slices.Contains(strings.Split(m.ErrantGTIDs, ","), g) {
			out = append(out, g)
		}
	}
	return strings.Join(out, ",")
}

// fetchable is what member m holds (its history less its errant
// transactions) and what of it could be replicated from it now: what its
// SQL thread has applied or still will (a broken one applies nothing more).
func (s Snapshot) fetchable(m Member) (held, served gtid.History, err error) {
	held, err = gtid.ParseHistory(s.Flavor, m.Executed, m.Retrieved)
	if err != nil {
		return held, served, err
	}
	served = held
	if m.ReplicationBroken {
		if served, err = gtid.ParseHistory(s.Flavor, m.Executed, ""); err != nil {
			return held, served, err
		}
	}
	if m.ErrantGTIDs != "" {
		if held, err = held.Without(m.ErrantGTIDs); err != nil {
			return held, served, err
		}
		if served, err = served.Without(m.ErrantGTIDs); err != nil {
			return held, served, err
		}
	}
	return held, served, nil
}

// unseenAcknowledgers, in lossless mode, lists the members that may have
// acknowledged transactions we lack and whose data we could not read this
// iteration: every replica but an asynchronous one. A primary's
// transaction is acknowledged once one replica has it, so only when we have
// read every such replica's history (and none is ahead: betterPeer) do we
// hold every acknowledged transaction. The old primary acknowledged
// nothing to itself: a member recorded as the primary, or the lock's
// former holder when its record lists acknowledgers (a lossless primary's,
// whose role reads unknown while its mysqld hangs). The former holder is
// not the old primary by that alone: it may have taken the lock, never
// unfenced, and streamed from the writable old primary all along (found by
// the random-fault loop test). A member whose mysqld is down counts: its relay log
// is still on its disk. A member with a stale record that the old
// primary's TagAcknowledgers leaves out does not: that primary saw every
// write it may have acknowledged on a listed member (a scaled-down
// member's leftover record would otherwise block every promotion).
func (s Snapshot) unseenAcknowledgers() []string {
	if !s.Rules.Lossless {
		return nil
	}
	former, _ := find(s.Members, s.FormerLeader)
	var out []string
	for _, m := range s.Members {
		wasPrimary := m.Primary || m.Name == s.FormerLeader && m.AcknowledgersKnown
		if m.Name == s.Self || wasPrimary || m.Async || (m.Observed && m.Reachable) {
			continue
		}
		if former.AcknowledgersKnown && m.RecordStale && !slices.Contains(former.Acknowledgers, m.Name) {
			continue // a leftover record: the old primary vouched it holds nothing others lack
		}
		if m.Removed {
			continue // a member scaled away: no mysqld of it acknowledges, or ever will
		}
		out = append(out, m.Name)
	}
	return out
}

// fencedSource reports whether addr is a member's mysqld that answered
// read-only this iteration: it takes no writes (only the lock holder, us,
// unfences), so a receiver still pulling from it can acknowledge nothing new
// and need not be stopped. A planned hand-over's old primary is one.
func (s Snapshot) fencedSource(addr string) bool {
	_, ok := s.fencedMember(addr)
	return ok
}

// fencedMember is the other member whose mysqld is at addr, when it
// answered read-only this iteration.
func (s Snapshot) fencedMember(addr string) (Member, bool) {
	for _, m := range s.Members {
		if addr != "" && m.Addr == addr && m.Name != s.Self && m.Observed && m.Reachable && !m.Writable {
			return m, true
		}
	}
	return Member{}, false
}

// writableOthers lists the other members whose mysqld answered writable.
func (s Snapshot) writableOthers() []string {
	var out []string
	for _, m := range s.Members {
		if m.Name != s.Self && m.Observed && m.Reachable && m.Writable {
			out = append(out, m.Name)
		}
	}
	return out
}

// betterPeer names a reachable member that ranks above us and could take
// over (not errant, nor asynchronous in lossless mode): one
// whose history (retrieved ∪ executed) has transactions ours lacks, or, for
// histories neither of which contains the other, the usual tie-break. The
// leader we took over from is no candidate. "" when we rank first.
func (s Snapshot) betterPeer() string {
	self, ok := find(s.Members, s.Self)
	if !ok {
		return ""
	}
	// We hold the lock: rank our data, not our eligibility.
	self.Fresh, self.Healthy, self.NoFailover, self.ReplicationBroken, self.Errant, self.Lag = true, true, false, false, false, nil
	cands := []Member{self}
	for _, m := range s.Members {
		if m.Name != s.Self && m.Name != s.FormerLeader && m.Observed && m.Reachable {
			cands = append(cands, m)
		}
	}
	// Lag does not matter here (we have the lock, and lag is what we are
	// catching up on); a peer that never acknowledged cannot take over.
	ranked := RankCandidates(s.Flavor, cands, Rules{Lossless: s.Rules.Lossless})
	if len(ranked) == 0 || ranked[0].Name == s.Self {
		return ""
	}
	for _, c := range ranked {
		if c.Name == s.Self && c.Missing == 0 {
			return "" // equal data: the tie-break does not move a lock
		}
	}
	return ranked[0].Name
}

// bestOther is the best-ranked eligible member other than ourselves.
func bestOther(s Snapshot) string {
	var others []Member
	for _, m := range s.Members {
		if m.Name != s.Self && !slices.Contains(s.FailedTargets, m.Name) {
			others = append(others, m)
		}
	}
	if ranked := RankCandidates(s.Flavor, others, s.Rules); len(ranked) > 0 {
		return ranked[0].Name
	}
	return ""
}

// whyNoneEligible names each other member and what keeps it from leading,
// so that a release on shutdown says why it was not a hand-over.
func whyNoneEligible(s Snapshot) string {
	var why []string
	for _, m := range s.Members {
		if m.Name == s.Self {
			continue
		}
		if slices.Contains(s.FailedTargets, m.Name) {
			why = append(why, m.Name+": a hand-over to it did not complete")
		} else if w := Ineligibility(m, s.Rules); w != "" {
			why = append(why, m.Name+": "+w)
		}
	}
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}

func decideLeaderless(s Snapshot) Action {
	self, ok := find(s.Members, s.Self)
	if !ok {
		return Action{Kind: Idle, Reason: "leaderless, and our own member record is not published yet"}
	}
	graceOver := !s.LeaderlessSince.IsZero() && s.Now.Sub(s.LeaderlessSince) >= s.Grace
	race := Acquire
	if !s.Initialized {
		race = Bootstrap
	}
	if sw := s.Switchover; sw != nil && sw.From == "" && sw.To != "" && s.Initialized {
		// A manual failover: only the named member races, unless it has not
		// taken over within the grace period (it may be dead).
		if sw.To == s.Self {
			rules := s.Rules
			if sw.Force {
				// Force overrides lag and errant transactions, never an
				// operator's fence.
				rules, self.Errant = Rules{Fenced: s.Rules.Fenced}, false
			}
			if why := Ineligibility(self, rules); why != "" {
				return Action{Kind: Idle, Reason: "manual failover to us refused: " + why}
			}
			return Action{Kind: Acquire, Reason: "manual failover requested"}
		}
		if !graceOver {
			return Action{Kind: WaitForBetter, Target: sw.To, Reason: "manual failover to " + sw.To + " requested"}
		}
	}
	if why := Ineligibility(self, s.Rules); why != "" {
		return Action{Kind: Idle, Reason: "leaderless, but we may not take over: " + why}
	}
	// The holder of an expired lock failed to renew it: presume it dead, so
	// nobody waits for it to race.
	var contenders []Member
	for _, m := range s.Members {
		if m.Name == s.Self || m.Name != s.Leader {
			contenders = append(contenders, m)
		}
	}
	ranked := RankCandidates(s.Flavor, contenders, s.Rules)
	if !slices.ContainsFunc(ranked, func(c Candidate) bool { return c.Name == s.Self }) {
		return Action{Kind: Idle, Reason: "leaderless, and our GTID history cannot be read"}
	}
	what := "leaderless"
	if !s.Initialized {
		what = "cluster not initialized"
	}
	if name, why := s.awaitedData(self); name != "" {
		return Action{Kind: WaitForBetter, Target: name, Reason: what + "; " + why}
	}
	if ranked[0].Name == s.Self {
		return Action{Kind: race, Reason: what + ", and we are the best candidate"}
	}
	if graceOver {
		return Action{Kind: race, Reason: fmt.Sprintf("%s for %s and the best candidate %s has not taken over", what, s.Now.Sub(s.LeaderlessSince), ranked[0].Name)}
	}
	return Action{Kind: WaitForBetter, Target: ranked[0].Name, Reason: fmt.Sprintf("%s; %s is the better candidate", what, ranked[0].Name)}
}

// awaitedData applies "data before eligibility" before anyone races: a
// member we cannot read now (its agent did not answer, or has not read its
// mysqld since it started) whose record, still fresh, says it holds
// transactions we lack is
// waited for, for at most DataWait of leaderlessness. A cluster started
// cold (every pod deleted at once, a node restarted) brings its members
// back seconds apart, and the first agent up would otherwise lead with
// whatever it has, leaving the more complete members diverged. The grace
// period does not end this wait: the better member is not dead, only late.
// The expired lock's holder is presumed dead, as in every failover (its
// unreplicated tail is the asynchronous mode's loss); a holder that
// released the lock on its way down is waited for like any member.
func (s Snapshot) awaitedData(self Member) (name, why string) {
	var waited time.Duration // zero LeaderlessSince: leaderless as of now
	if !s.LeaderlessSince.IsZero() {
		waited = s.Now.Sub(s.LeaderlessSince)
	}
	if !s.Initialized || waited >= s.DataWait {
		return "", ""
	}
	ours, err := gtid.ParseHistory(s.Flavor, self.Executed, self.Retrieved)
	if err != nil {
		return "", "" // the ranking refuses us, and says why
	}
	for _, m := range s.Members {
		switch {
		case m.Name == s.Self, m.Name == s.Leader && s.LeaderExpired, m.RecordStale, m.Rebuilding,
			m.Fresh && m.Healthy,     // readable now: the ranking and the promotion's data gap judge it
			m.Fresh && !m.StartingUp, // a running agent's mysqld died: failover does not wait for it
			m.Errant && m.ErrantGTIDs == "":
			continue
		}
		held, _, err := s.fetchable(m)
		if err != nil {
			continue
		}
		if n := ours.Missing(held); n > 0 {
			left := s.DataWait - waited
			return m.Name, fmt.Sprintf("%s cannot be read now, but its record says it holds %d transactions we lack: "+
				"waiting for it to come back, %s more at most", m.Name, n, left.Round(time.Second))
		}
	}
	return "", ""
}

func find(members []Member, name string) (Member, bool) {
	for _, m := range members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}
