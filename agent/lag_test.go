package agent

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

func TestGrownLag(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name               string
		behind             time.Duration
		since, goneAt, now time.Time
		want               time.Duration
	}{
		{"receiving now", 2 * time.Second, at(0), time.Time{}, at(0), 2 * time.Second},
		{"not receiving for 10m, leader alive", 2 * time.Second, at(0), time.Time{}, at(10 * time.Minute), 10*time.Minute + 2*time.Second},
		{"leader gone 1m after we stopped receiving", 0, at(0), at(time.Minute), at(time.Hour), time.Minute},
		{"leader gone before we stopped receiving", 3 * time.Second, at(time.Minute), at(0), at(time.Hour), 3 * time.Second},
		{"leader gone later than now", 0, at(0), at(time.Hour), at(time.Minute), time.Minute},
	} {
		if got := grownLag(tc.behind, tc.since, tc.goneAt, tc.now); got != tc.want {
			t.Errorf("%s: grownLag = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// lagStep is one event seen by replicaLag, at an offset from the start.
type lagStep struct {
	at time.Duration
	// One of: a SHOW REPLICA STATUS (replica), or a DCS snapshot (snapshot
	// true) with a live leader or not, and our own record's lag.
	replica   *mysqlctl.ReplicaStatus
	noReplica bool
	snapshot  bool
	live      bool
	lastAlive time.Duration // when the lost leader was last known alive
	ownLag    *time.Duration
}

func TestReplicaLagFollowsTheReceiverAndTheLeader(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	secs := func(n int64) *int64 { return &n }
	dur := func(d time.Duration) *time.Duration { return &d }
	receiving := func(behind *int64) *mysqlctl.ReplicaStatus {
		return &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadRunning, SQLThread: mysqlctl.ThreadRunning, SecondsBehind: behind}
	}
	// A stopped receiver's Seconds_Behind_Source is stale or NULL; the
	// stale 0 is what the agent used to keep reporting.
	stopped := &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadStopped, SQLThread: mysqlctl.ThreadRunning, SecondsBehind: secs(0)}
	connecting := &mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadConnecting, SQLThread: mysqlctl.ThreadRunning}
	live := lagStep{snapshot: true, live: true}
	lost := func(lastAlive time.Duration) lagStep { return lagStep{snapshot: true, lastAlive: lastAlive} }
	observe := func(at time.Duration, r *mysqlctl.ReplicaStatus) lagStep { return lagStep{at: at, replica: r} }
	snap := func(at time.Duration, s lagStep) lagStep { s.at = at; return s }

	for _, tc := range []struct {
		name  string
		steps []lagStep
		now   time.Duration
		want  *time.Duration // nil: not a replica
	}{
		{"receiving: the server's delay",
			[]lagStep{observe(0, receiving(secs(4))), snap(0, live)}, 0, dur(4 * time.Second)},
		{"stopped receiver, leader alive: grows with the time since it last received",
			[]lagStep{observe(0, receiving(secs(0))), snap(0, live), observe(time.Second, stopped), snap(time.Second, live),
				observe(2*time.Hour, stopped), snap(2*time.Hour, live)}, 2 * time.Hour, dur(2 * time.Hour)},
		{"grows between observations too (published later in the iteration)",
			[]lagStep{observe(0, receiving(secs(1))), snap(0, live), observe(10*time.Second, connecting), snap(10*time.Second, live)},
			15 * time.Second, dur(16 * time.Second)},
		{"failover: frozen when the leader was last alive, for ever",
			[]lagStep{observe(0, receiving(secs(1))), snap(0, live), observe(time.Second, connecting), snap(time.Second, live),
				observe(6*time.Second, connecting), snap(6*time.Second, lost(2*time.Second)),
				observe(24*time.Hour, connecting), snap(24*time.Hour, lost(3*time.Hour))},
			24 * time.Hour, dur(3 * time.Second)},
		{"a new leader: the leaderless gap is not counted, growth resumes",
			[]lagStep{observe(0, receiving(secs(0))), snap(0, live), observe(time.Second, connecting), snap(time.Second, live),
				snap(6*time.Second, lost(2*time.Second)), snap(time.Minute, live), observe(time.Minute, connecting)},
			time.Minute + 10*time.Second, dur(12 * time.Second)},
		{"receiving again: the server's delay, whatever was counted",
			[]lagStep{observe(0, receiving(secs(0))), snap(0, live), observe(time.Second, stopped), snap(time.Hour, live),
				observe(time.Hour, receiving(secs(7))), snap(time.Hour, live)}, time.Hour, dur(7 * time.Second)},
		{"receiving with an unknown delay: the last one stands, nothing missed",
			[]lagStep{observe(0, receiving(secs(3))), snap(0, live), observe(5*time.Second, receiving(nil)), snap(5*time.Second, live),
				observe(6*time.Second, stopped), snap(6*time.Second, live)}, 15 * time.Second, dur(13 * time.Second)},
		{"restart with the receiver down, leader alive: from our record's lag, growing",
			[]lagStep{observe(0, connecting), {at: 0, snapshot: true, live: true, ownLag: dur(40 * time.Second)}},
			10 * time.Second, dur(50 * time.Second)},
		{"restart with the receiver down, no record: from 0, growing",
			[]lagStep{observe(0, stopped), snap(0, live)}, 10 * time.Second, dur(10 * time.Second)},
		{"restart with the receiver down, leaderless: frozen, never blocks a failover",
			[]lagStep{observe(0, connecting), snap(0, lost(-5*time.Second))}, time.Hour, dur(0)},
		{"the record seeds only a count started without a measurement",
			[]lagStep{observe(0, receiving(secs(2))), {at: 0, snapshot: true, live: true, ownLag: dur(time.Hour)}},
			0, dur(2 * time.Second)},
		{"replication reset: not a replica",
			[]lagStep{observe(0, receiving(secs(2))), snap(0, live), {at: time.Second, noReplica: true}}, time.Hour, nil},
	} {
		var l replicaLag
		for _, s := range tc.steps {
			now := t0.Add(s.at)
			switch {
			case s.snapshot:
				l = l.leader(s.live, t0.Add(s.lastAlive), now)
				var own *dcs.Member
				if s.ownLag != nil {
					own = &dcs.Member{Name: "db3", Lag: s.ownLag}
				}
				l = l.seededFrom(own)
			case s.noReplica:
				l = l.observed(nil, now)
			default:
				l = l.observed(s.replica, now)
			}
		}
		got := l.at(t0.Add(tc.now))
		switch {
		case tc.want == nil && got != nil:
			t.Errorf("%s: lag %v, want none", tc.name, *got)
		case tc.want != nil && (got == nil || *got != *tc.want):
			t.Errorf("%s: lag %v, want %v", tc.name, fmtLag(got), *tc.want)
		}
	}
}

func fmtLag(d *time.Duration) string {
	if d == nil {
		return "none"
	}
	return d.String()
}

// Every replica's receiver is down while the cluster has no leader. However
// long that lasts, it must not make them ineligible, or no one would ever
// take over.
func TestLeaderlessOutageKeepsReplicasEligible(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	ttl, maxLag := 5*time.Second, 3*time.Second // even a limit below ttl
	behind := int64(0)
	var l replicaLag
	l = l.observed(&mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadRunning, SecondsBehind: &behind}, t0)
	l = l.leader(true, time.Time{}, t0)
	// The source dies just after; the lock, last renewed at t0, is seen
	// lost ttl later; nobody takes it for an hour (paused, say). An etcd
	// lock vanishes (lastAlive estimated from ttl), a Lease stays readable.
	for _, lock := range []*dcs.Leader{nil, {Holder: "db1", Expired: true, ObservedAt: t0}} {
		l := l.observed(&mysqlctl.ReplicaStatus{IOThread: mysqlctl.ThreadConnecting}, t0.Add(time.Second))
		lostAt := t0.Add(ttl + time.Second)
		l = l.leader(false, leaderLastAlive(lock, ttl, lostAt), lostAt)
		m := failover.Member{Name: "db2", Fresh: true, Healthy: true, Lag: l.at(t0.Add(time.Hour))}
		if why := failover.Ineligibility(m, failover.Rules{MaxLag: maxLag}); why != "" {
			t.Errorf("lock %+v: after an hour without a leader the replica is ineligible: %s", lock, why)
		}
	}
}

func TestLiveLeaderOther(t *testing.T) {
	primary := []dcs.Member{{Name: "db1", Role: dcs.RolePrimary}}
	promoting := []dcs.Member{{Name: "db1", Role: dcs.RoleReplica}}
	for _, tc := range []struct {
		name    string
		lock    *dcs.Leader
		members []dcs.Member
		want    bool
	}{
		{"no lock", nil, primary, false},
		{"released", &dcs.Leader{}, primary, false},
		{"expired", &dcs.Leader{Holder: "db1", Expired: true}, primary, false},
		{"ours", &dcs.Leader{Holder: "db2"}, primary, false},
		{"another's, primary", &dcs.Leader{Holder: "db1"}, primary, true},
		{"another's, still promoting", &dcs.Leader{Holder: "db1"}, promoting, false},
		{"another's, without a record", &dcs.Leader{Holder: "db1"}, nil, true},
		{"unreadable but valid", &dcs.Leader{Holder: dcs.UnknownHolder}, primary, true},
	} {
		if got := liveLeaderOther(&dcs.Cluster{Leader: tc.lock, Members: tc.members}, "db2"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
