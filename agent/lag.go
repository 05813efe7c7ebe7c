package agent

import (
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// replicaLag follows this member's replication delay across iterations.
//
// Seconds_Behind_Source is only meaningful while the receiver runs. Once it
// stops (a cut link, a dead source, STOP REPLICA) the member falls behind by
// however much its source writes, which we cannot see: we count the time a
// live leader could have written since we last saw the receiver running.
// Without a live leader nothing new is written, so the delay freezes: every
// replica's receiver is down during a failover, and a delay that kept growing
// then would make them all ineligible and leave the cluster without a
// primary.
//
// The zero value is "not a replica": no delay.
type replicaLag struct {
	// counting: a replica whose delay we follow.
	counting bool
	// behind was the delay at since: the last Seconds_Behind_Source read
	// while receiving, or what the count started from.
	behind time.Duration
	// since is when we last saw the receiver running, or when the count
	// started or resumed.
	since time.Time
	// leaderGoneAt is when the leader was last known alive, once it is
	// lost; zero while a live leader exists (liveLeaderOther).
	leaderGoneAt time.Time
	// seedFromRecord: the count started without a measurement; the next
	// DCS snapshot may raise behind to what our record last said.
	seedFromRecord bool
}

// grownLag is a delay of behind at since, grown by the time until now
// during which the leader was alive: the growth stops at leaderGoneAt when
// that is set, and is never negative.
func grownLag(behind time.Duration, since, leaderGoneAt, now time.Time) time.Duration {
	end := now
	if !leaderGoneAt.IsZero() && leaderGoneAt.Before(end) {
		end = leaderGoneAt
	}
	return behind + max(0, end.Sub(since))
}

// at is the delay at now; nil when not a replica.
func (l replicaLag) at(now time.Time) *time.Duration {
	if !l.counting {
		return nil
	}
	d := grownLag(l.behind, l.since, l.leaderGoneAt, now)
	return &d
}

// observed takes what SHOW REPLICA STATUS said at now; r is nil when
// replication is not configured.
//
// When counting starts without a running receiver, typically an agent
// (re)started while its source is unreachable, the earlier outage is
// unknown: we start from what our member record last published (a
// restarted agent keeps the delay its predecessor reported, see
// seededFrom), else from 0, and grow from now. That is conservative with
// what is known, yet never blocks a failover for ever: the delay grows only
// while a leader lives, and a replica whose receiver is down while one lives
// becomes ineligible after maximum_lag_on_failover.
func (l replicaLag) observed(r *mysqlctl.ReplicaStatus, now time.Time) replicaLag {
	switch {
	case r == nil:
		return replicaLag{leaderGoneAt: l.leaderGoneAt}
	case r.IOThread == mysqlctl.ThreadRunning:
		// Receiving, so missing nothing; the delay is the server's when it
		// knows one (NULL while the applier is stopped, say).
		if lag, ok := knownLag(r); ok {
			l.behind = lag
		} else if !l.counting {
			l.behind = 0
		}
		l.counting, l.since, l.seedFromRecord = true, now, false
	case !l.counting:
		l.counting, l.behind, l.since, l.seedFromRecord = true, 0, now, true
	}
	return l
}

// seededFrom raises a count started without a measurement to the delay our
// own member record last published, once.
func (l replicaLag) seededFrom(own *dcs.Member) replicaLag {
	if !l.seedFromRecord {
		return l
	}
	if l.counting && own != nil && own.Lag != nil {
		l.behind = max(l.behind, *own.Lag)
	}
	l.seedFromRecord = false
	return l
}

// leader takes whether a live leader exists at now, and, when it does not,
// when the leader was last known alive (lastAlive, see leaderLastAlive).
func (l replicaLag) leader(live bool, lastAlive, now time.Time) replicaLag {
	switch {
	case live && !l.leaderGoneAt.IsZero():
		// A leader again: the frozen delay stands and grows from now. The
		// leaderless gap does not count; nobody wrote then.
		if l.counting {
			l.behind, l.since = grownLag(l.behind, l.since, l.leaderGoneAt, now), now
		}
		l.leaderGoneAt = time.Time{}
	case !live && l.leaderGoneAt.IsZero():
		l.leaderGoneAt = lastAlive
	}
	return l
}

// leaderLastAlive estimates, when no live leader exists at now, when the
// last one was last known alive, on our clock. A lock still readable (expired,
// released, or taken by us) last changed when its holder renewed or let it
// go. One that vanished (an etcd key, with its lease) did so ttl after its
// last renewal. Freezing there and not when we noticed the loss, ttl later,
// keeps the detection delay out of every replica's lag: otherwise a failover
// would age them all by ttl, and with maximum_lag_on_failover <= ttl leave
// no candidate.
func leaderLastAlive(lock *dcs.Leader, ttl time.Duration, now time.Time) time.Time {
	if lock != nil && !lock.ObservedAt.IsZero() && !lock.ObservedAt.After(now) {
		return lock.ObservedAt
	}
	return now.Add(-ttl)
}

// liveLeaderOther reports whether cl shows a valid lock held by another
// member that serves as the primary: only then can a source be writing what
// we do not receive. A holder still promoting (its record not primary yet)
// writes nothing, however long it takes, and may give the lock up to us. A
// holder without a record is taken as writing.
func liveLeaderOther(cl *dcs.Cluster, self string) bool {
	l := cl.Leader
	if l == nil || l.Holder == "" || l.Expired || l.Holder == self {
		return false
	}
	m, ok := cl.Member(l.Holder)
	return !ok || m.Role == dcs.RolePrimary
}

// receiverState is the state of our receiver as the member record says it.
func receiverState(obs mysqlctl.Observation, localErr error) dcs.ReceiverState {
	r := obs.Replica
	switch {
	case localErr != nil || r == nil:
		return dcs.ReceiverUnknown
	case r.IOThread == mysqlctl.ThreadRunning:
		return dcs.ReceiverRunning
	case r.IOThread == mysqlctl.ThreadConnecting:
		return dcs.ReceiverConnecting
	default:
		return dcs.ReceiverStopped
	}
}
