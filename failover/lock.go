package failover

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// The lock's rules beyond the race for a free lock: who may take a
// holder's still valid lock (confirmed death), and what a member promises
// a leader cut off from the DCS (failsafe). The agent gathers their inputs
// over the network; the rules live here, next to Decide, and are tested
// as its table is.

// LossReport is one member's account of the lock holder it lost: both the
// holder's replication stream and its agent, for LostFor.
type LossReport struct {
	Member, Leader, Instance string
	LostFor                  time.Duration
}

// leaderConfirmedDead: the holder the lock names (that instance of it) has
// been lost for ConfirmWindow by us and by enough others to make a
// majority of the members. Our own report is required: a majority that
// excludes us may lose a holder we still stream from.
func (s Snapshot) leaderConfirmedDead() bool {
	voters := map[string]bool{}
	for _, r := range s.LeaderLost {
		if r.Leader == s.Leader && r.Instance == s.LeaderInstance && r.Member != s.Leader && r.LostFor >= s.ConfirmWindow {
			voters[r.Member] = true
		}
	}
	return voters[s.Self] && len(voters) >= len(s.Members)/2+1
}

// FailsafeAsk is a leader's request that a member confirm it (failsafe
// mode: the leader cannot reach the DCS). Hold is how long the leader
// relies on the promise (its ttl); 0 from an older agent.
type FailsafeAsk struct {
	Leader, Instance string
	Hold             time.Duration
}

// FailsafeView is what the asked member knows when it answers.
type FailsafeView struct {
	Self    string
	Enabled bool
	TTL     time.Duration
	// Holding: we hold the lock ourselves. Leader and Instance name the
	// holder of a valid lock in our last view; "" when there was none.
	Holding          bool
	Leader, Instance string
}

// ErrFailsafeRefused is a request a member will not confirm.
var ErrFailsafeRefused = errors.New("failsafe confirmation refused")

// FailsafePromise judges a leader's request: how long the member promises
// not to race, or why it refuses. It refuses when failsafe mode is off,
// when it holds the lock itself, or when its last view of the lock names
// someone else. The promise lasts the longer of the leader's ttl and its
// own, so that it outlasts the deadline the leader extends by its ttl even
// when a run-time change of ttl reached the members but not the leader cut
// off from the DCS. A hold beyond the longest valid ttl is refused: no
// leader can rely on it.
func FailsafePromise(ask FailsafeAsk, v FailsafeView) (time.Duration, error) {
	switch {
	case ask.Leader == "" || ask.Instance == "":
		return 0, fmt.Errorf("%w: leader and instance are required", ErrFailsafeRefused)
	case !v.Enabled:
		return 0, fmt.Errorf("%w: failsafe mode is off in the cluster config", ErrFailsafeRefused)
	case ask.Leader == v.Self:
		return 0, fmt.Errorf("%w: %s is this member", ErrFailsafeRefused, ask.Leader)
	case v.Holding:
		return 0, fmt.Errorf("%w: %s holds the lock itself", ErrFailsafeRefused, v.Self)
	case v.Leader != "" && (v.Leader != ask.Leader || v.Instance != ask.Instance):
		return 0, fmt.Errorf("%w: the lock names %s (instance %s)", ErrFailsafeRefused, v.Leader, v.Instance)
	case ask.Hold < 0 || ask.Hold > dcs.MaxTTL:
		return 0, fmt.Errorf("%w: hold_ms %d is outside 0..%d", ErrFailsafeRefused, ask.Hold.Milliseconds(), dcs.MaxTTL.Milliseconds())
	}
	return max(ask.Hold, v.TTL), nil
}

// FailsafeUnconfirmed lists the members of a leader's last known member
// set, other than the leader, that did not confirm it. The leader stays
// writable without the DCS only while it is empty. Every member, not a
// majority: one that could not be asked might reach the DCS and take the
// lock.
func FailsafeUnconfirmed(leader string, members []string, confirmed map[string]bool) []string {
	var out []string
	for _, m := range members {
		if m != leader && !confirmed[m] && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}
