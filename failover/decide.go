package failover

import (
	"fmt"
	"slices"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Kind is what the agent does in one loop iteration.
type Kind int

const (
	// Idle: nothing to change (paused, or not eligible while leaderless).
	Idle Kind = iota
	// FenceSelf: make the local mysqld read-only and kill its clients now;
	// the lock may no longer be ours.
	FenceSelf
	// ReleaseLock: give the lock up so a healthy member takes over without
	// waiting for ttl (our mysqld is down).
	ReleaseLock
	// Bootstrap: race for the lock of an uninitialised cluster, then record
	// its identity and become the first primary.
	Bootstrap
	// Acquire: race for a lost leader's lock, then promote.
	Acquire
	// WaitForBetter: leaderless, but a better candidate races first.
	WaitForBetter
	// Lead: renew the lock and make sure we are the writable primary.
	Lead
	// Follow: be a read-only replica of Target (the lock holder).
	Follow
	// Switchover: hand the lock to Target in a planned, lossless hand-over.
	Switchover
	// RejectSwitchover: the pending request cannot be carried out; clear it.
	RejectSwitchover
	// ClearRequest: the pending request is fulfilled (we lead as asked).
	ClearRequest
)

var kindNames = [...]string{"idle", "fence-self", "release-lock", "bootstrap", "acquire", "wait-for-better",
	"lead", "follow", "switchover", "reject-switchover", "clear-request"}

func (k Kind) String() string {
	if int(k) >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Action is the decision of one iteration.
type Action struct {
	Kind Kind
	// Target is the member to follow, or to hand the lock to.
	Target string
	// Reason explains the decision, for logs and events.
	Reason string
	// RenewOnly (with Lead): keep the lock but change nothing on mysqld,
	// because the cluster is paused.
	RenewOnly bool
}

// SwitchoverRequest is a pending planned hand-over.
type SwitchoverRequest struct {
	// From is the leader it applies to; "" for whoever leads.
	From string
	// To is the requested new leader; "" for the best candidate.
	To          string
	ScheduledAt time.Time
	// Force lets a manual failover target take over although it lags or
	// has errant transactions.
	Force bool
}

// Snapshot is everything one decision depends on.
type Snapshot struct {
	Self   string
	Flavor gtid.Flavor
	// Now is the agent's clock, the only clock decisions compare with.
	Now time.Time

	Paused      bool
	Initialized bool
	// ShuttingDown: the agent is stopping (SIGTERM); a holder hands over.
	ShuttingDown bool

	// Leader is the lock holder; "" when nobody holds it. LeaderExpired
	// reports the backend's expiry rule on our clock.
	Leader        string
	LeaderExpired bool
	// Deadline is when our hold on the lock ends, computed from the start of
	// the last successful renewal (start + ttl - safety margin). Zero when we
	// have not renewed since we (re)started.
	Deadline time.Time
	// LeaderlessSince is when this agent first saw no valid leader; zero
	// while there is one.
	LeaderlessSince time.Time
	// Grace is how long a member that is not the best candidate waits before
	// it races too, in case the best one is dead.
	Grace time.Duration
	// MaxLag is maximum_lag_on_failover; 0 means no limit.
	MaxLag time.Duration

	// LocalUp: our mysqld answered this iteration.
	LocalUp bool
	// LocalDown: our mysqld is provably not running (connection refused),
	// so it can take no writes. A mysqld that merely does not answer may be
	// hung and resume writable: its holder keeps the lock, since it cannot
	// fence it, and giving the lock up would let another member promote
	// next to it.
	LocalDown bool
	// Members are all members, ourselves included, as known now.
	Members []Member

	Switchover *SwitchoverRequest
}

func (s Snapshot) holdsLock() bool { return s.Leader == s.Self && !s.LeaderExpired }

func (s Snapshot) leaderless() bool { return s.Leader == "" || s.LeaderExpired }

// Decide returns the one action to take now. It is a pure function.
func Decide(s Snapshot) Action {
	// A holder past its own deadline may already have been replaced: fence
	// before anything else (a frozen agent waking up lands here). The agent
	// clears Deadline once fenced, so this does not repeat.
	if s.Leader == s.Self && !s.Deadline.IsZero() && !s.Now.Before(s.Deadline) {
		return Action{Kind: FenceSelf, Reason: "lock deadline passed without a successful renewal"}
	}
	if !s.LocalUp {
		if s.holdsLock() && !s.Paused && s.LocalDown {
			return Action{Kind: ReleaseLock, Reason: "local mysqld is down"}
		}
		if s.holdsLock() && !s.Paused {
			return Action{Kind: Lead, RenewOnly: true, Reason: "local mysqld does not answer and may resume writable: keep the lock"}
		}
		return Action{Kind: Idle, Reason: "local mysqld is down"}
	}
	if s.Paused {
		if s.holdsLock() {
			return Action{Kind: Lead, RenewOnly: true, Reason: "cluster paused: keep the lock, change nothing"}
		}
		return Action{Kind: Idle, Reason: "cluster paused"}
	}
	if s.holdsLock() {
		if s.Deadline.IsZero() {
			// Held from before a restart or a self-fence: nobody else may take
			// a valid lock, so renewing is safe, but writing waits for a
			// deadline of our own.
			return Action{Kind: Lead, RenewOnly: true, Reason: "lock held without a renewal of ours: renew before writing"}
		}
		return decideAsLeader(s)
	}
	if s.leaderless() {
		return decideLeaderless(s)
	}
	return Action{Kind: Follow, Target: s.Leader, Reason: "following the lock holder"}
}

func decideAsLeader(s Snapshot) Action {
	if s.ShuttingDown {
		if best := bestOther(s); best != "" {
			return Action{Kind: Switchover, Target: best, Reason: "agent stopping: hand over to the best replica"}
		}
		return Action{Kind: ReleaseLock, Reason: "agent stopping and no replica can take over"}
	}
	sw := s.Switchover
	if sw == nil || (sw.From != "" && sw.From != s.Self) || s.Now.Before(sw.ScheduledAt) {
		return Action{Kind: Lead, Reason: "holding the lock"}
	}
	if sw.To == s.Self {
		if sw.From == "" {
			return Action{Kind: ClearRequest, Reason: "manual failover to us is complete"}
		}
		return Action{Kind: RejectSwitchover, Reason: fmt.Sprintf("switchover target %s is already the leader", sw.To)}
	}
	if sw.To != "" {
		m, ok := find(s.Members, sw.To)
		if !ok {
			return Action{Kind: RejectSwitchover, Reason: fmt.Sprintf("switchover target %s is not a member", sw.To)}
		}
		if why := Ineligibility(m, s.MaxLag); why != "" {
			return Action{Kind: RejectSwitchover, Reason: fmt.Sprintf("switchover target %s is not eligible: %s", sw.To, why)}
		}
		return Action{Kind: Switchover, Target: sw.To, Reason: "switchover requested"}
	}
	if best := bestOther(s); best != "" {
		return Action{Kind: Switchover, Target: best, Reason: "switchover requested to the best replica"}
	}
	return Action{Kind: RejectSwitchover, Reason: "switchover requested but no replica is eligible"}
}

// bestOther is the best-ranked eligible member other than ourselves.
func bestOther(s Snapshot) string {
	var others []Member
	for _, m := range s.Members {
		if m.Name != s.Self {
			others = append(others, m)
		}
	}
	if ranked := RankCandidates(s.Flavor, others, s.MaxLag); len(ranked) > 0 {
		return ranked[0].Name
	}
	return ""
}

func decideLeaderless(s Snapshot) Action {
	if !s.Initialized {
		return Action{Kind: Bootstrap, Reason: "cluster not initialized"}
	}
	self, ok := find(s.Members, s.Self)
	if !ok {
		return Action{Kind: Idle, Reason: "leaderless, and our own member record is not published yet"}
	}
	graceOver := !s.LeaderlessSince.IsZero() && s.Now.Sub(s.LeaderlessSince) >= s.Grace
	if sw := s.Switchover; sw != nil && sw.From == "" && sw.To != "" {
		// A manual failover: only the named member races, unless it has not
		// taken over within the grace period (it may be dead).
		if sw.To == s.Self {
			maxLag := s.MaxLag
			if sw.Force {
				maxLag, self.Errant = 0, false
			}
			if why := Ineligibility(self, maxLag); why != "" {
				return Action{Kind: Idle, Reason: "manual failover to us refused: " + why}
			}
			return Action{Kind: Acquire, Reason: "manual failover requested"}
		}
		if !graceOver {
			return Action{Kind: WaitForBetter, Target: sw.To, Reason: "manual failover to " + sw.To + " requested"}
		}
	}
	if why := Ineligibility(self, s.MaxLag); why != "" {
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
	ranked := RankCandidates(s.Flavor, contenders, s.MaxLag)
	if !slices.ContainsFunc(ranked, func(c Candidate) bool { return c.Name == s.Self }) {
		return Action{Kind: Idle, Reason: "leaderless, and our GTID history cannot be read"}
	}
	if ranked[0].Name == s.Self {
		return Action{Kind: Acquire, Reason: "leaderless, and we are the best candidate"}
	}
	if graceOver {
		return Action{Kind: Acquire, Reason: fmt.Sprintf("leaderless for %s and the best candidate %s has not taken over", s.Now.Sub(s.LeaderlessSince), ranked[0].Name)}
	}
	return Action{Kind: WaitForBetter, Target: ranked[0].Name, Reason: fmt.Sprintf("leaderless; %s is the better candidate", ranked[0].Name)}
}

func find(members []Member, name string) (Member, bool) {
	for _, m := range members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}
