package failover

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Two MySQL source UUIDs.
const u1, u2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4e11fa47-71ca-11e1-9e33-c80aa9429562"

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// snap builds snapshots fluently: a healthy 3-member MariaDB cluster in which
// db1 leads and db2 is "me" unless a case says otherwise.
type snap struct{ s Snapshot }

func cluster() *snap {
	b := &snap{s: Snapshot{
		Self: "db2", Flavor: gtid.MariaDB, Now: t0, Initialized: true, LocalUp: true,
		Leader: "db1", Grace: 3 * time.Second, DataWait: 30 * time.Second, Rules: Rules{MaxLag: 30 * time.Second},
		Members: []Member{
			member("db1", "0-1-100"), member("db2", "0-1-100"), member("db3", "0-1-100"),
		},
	}}
	for i := range b.s.Members {
		b.s.Members[i].Addr = fmt.Sprintf("10.0.0.%d:3306", i+1)
	}
	return b
}

func member(name, executed string) Member {
	return Member{Name: name, Fresh: true, Healthy: true, Executed: executed}
}

func (b *snap) me(name string) *snap             { b.s.Self = name; return b }
func (b *snap) leader(name string) *snap         { b.s.Leader = name; return b }
func (b *snap) expired() *snap                   { b.s.LeaderExpired = true; return b }
func (b *snap) deadlineIn(d time.Duration) *snap { b.s.Deadline = t0.Add(d); return b }
func (b *snap) primary() *snap                   { b.s.LocalWritable = true; return b }
func (b *snap) localDown() *snap                 { b.s.LocalUp, b.s.LocalDown = false, true; return b }
func (b *snap) localHung() *snap                 { b.s.LocalUp = false; return b }
func (b *snap) hungFor(d, bound time.Duration) *snap {
	b.s.LocalUp, b.s.LocalHungSince, b.s.HangTimeout = false, t0.Add(-d), bound
	return b
}
func (b *snap) canKill() *snap       { b.s.CanKillLocal = true; return b }
func (b *snap) confirmedDead() *snap { return b.lostBy(time.Second, "db2", "db3") }

// lostBy: these members report the holder lost for d; the window is 1s.
func (b *snap) lostBy(d time.Duration, names ...string) *snap {
	b.s.ConfirmWindow = time.Second
	for _, n := range names {
		b.s.LeaderLost = append(b.s.LeaderLost, LossReport{Member: n, Leader: b.s.Leader, Instance: b.s.LeaderInstance, LostFor: d})
	}
	return b
}
func (b *snap) failsafeHeld() *snap              { b.s.FailsafeHeld = true; return b }
func (b *snap) failsafeLeader(name string) *snap { b.s.FailsafeLeader = name; return b }
func (b *snap) paused() *snap                    { b.s.Paused = true; return b }
func (b *snap) uninitialized() *snap             { b.s.Initialized = false; return b }
func (b *snap) stopping() *snap                  { b.s.ShuttingDown = true; return b }
func (b *snap) failedTarget(name string) *snap {
	b.s.FailedTargets = append(b.s.FailedTargets, name)
	return b
}
func (b *snap) leaderlessFor(d time.Duration) *snap {
	b.s.LeaderlessSince = t0.Add(-d)
	return b
}
func (b *snap) switchover(from, to string, at time.Duration) *snap {
	b.s.Switchover = &SwitchoverRequest{From: from, To: to, ScheduledAt: t0.Add(at)}
	return b
}
func (b *snap) duplicate() *snap {
	b.s.Duplicate = "instance b of db2 at http://10.0.0.9:8008"
	return b
}
func (b *snap) leaderInstance(i string) *snap { b.s.LeaderInstance = i; return b }
func (b *snap) configUnknown() *snap          { b.s.ConfigUnknown = true; return b }
func (b *snap) switchoverUnreadable() *snap   { b.s.SwitchoverUnreadable = true; return b }
func (b *snap) promotingFor(d, bound time.Duration) *snap {
	b.s.PromotingSince, b.s.PromotionTimeout = t0.Add(-d), bound
	return b
}
func (b *snap) force() *snap { b.s.Switchover.Force = true; return b }
func (b *snap) local(source string) *snap {
	b.s.LocalSource = source
	return b
}
func (b *snap) lossless() *snap { b.s.Rules.Lossless = true; return b }
func async(m *Member)           { m.Async = true }
func leftover(m *Member)        { m.Reachable, m.Fresh, m.RecordStale = false, false, true }
func silent(m *Member)          { m.Fresh = false } // its agent did not answer; its record is recent
func acknowledgers(names ...string) func(*Member) {
	return func(m *Member) { m.Acknowledgers, m.AcknowledgersKnown = names, true }
}
func rebuilding(m *Member) { m.Rebuilding = true }
func restarting(m *Member) { m.Restarting = true }
func (b *snap) with(name string, f func(*Member)) *snap {
	for i := range b.s.Members {
		if b.s.Members[i].Name == name {
			f(&b.s.Members[i])
		}
	}
	return b
}
func (b *snap) gtid(name, executed string) *snap {
	return b.with(name, func(m *Member) { m.Executed = executed })
}
func (b *snap) drop(name string) *snap {
	var kept []Member
	for _, m := range b.s.Members {
		if m.Name != name {
			kept = append(kept, m)
		}
	}
	b.s.Members = kept
	return b
}

// observed marks every other member's mysqld as probed: reachable,
// read-only and replicating from db1 unless f changes it.
func (b *snap) observed(f func(*Member)) *snap {
	for i := range b.s.Members {
		if m := &b.s.Members[i]; m.Name != b.s.Self {
			m.Observed, m.Reachable, m.PullingFrom = true, true, ""
			f(m)
		}
	}
	return b
}

func lag(d time.Duration) *time.Duration { return &d }

func TestDecide(t *testing.T) {
	cases := []struct {
		name   string
		snap   *snap
		kind   Kind
		target string
		renew  bool
		reason string
	}{
		// No leader.
		{"uninitialized cluster: the best data bootstraps", cluster().leader("").uninitialized().gtid("db2", "0-1-101"), Bootstrap, "", false, "not initialized"},
		{"uninitialized cluster: a worse member waits", cluster().leader("").uninitialized(), WaitForBetter, "db1", false, "not initialized"},
		{"uninitialized cluster: a worse member bootstraps after grace", cluster().leader("").uninitialized().leaderlessFor(3 * time.Second), Bootstrap, "", false, "has not taken over"},
		{"uninitialized cluster: nofailover does not bootstrap", cluster().leader("").uninitialized().gtid("db2", "0-1-101").with("db2", func(m *Member) { m.NoFailover = true }), Idle, "", false, "nofailover"},
		{"lock held but identity not recorded: bootstrap again", cluster().me("db1").deadlineIn(3 * time.Second).uninitialized(), Bootstrap, "", false, "not recorded"},
		{"no leader, best candidate acquires", cluster().leader("").gtid("db1", "0-1-90").gtid("db3", "0-1-99"), Acquire, "", false, "best candidate"},
		{"no leader, equal histories: name decides", cluster().leader("").me("db3"), WaitForBetter, "db1", false, "db1 is the better"},

		// I am leader.
		{"leader renews and leads", cluster().me("db1").deadlineIn(3 * time.Second).primary(), Lead, "", false, "holding"},
		{"leader past its deadline fences first", cluster().me("db1").deadlineIn(-time.Millisecond).primary(), FenceSelf, "", false, "deadline passed"},
		{"leader exactly at its deadline fences", cluster().me("db1").deadlineIn(0).primary(), FenceSelf, "", false, "deadline"},
		{"frozen leader wakes after expiry and fences", cluster().me("db1").deadlineIn(-10 * time.Second).primary().expired(), FenceSelf, "", false, "deadline"},
		{"holder without a deadline of its own (handed the lock) promotes while it renews", cluster().me("db1"), Promote, "", false, "promoting"},
		{"holder without a deadline of its own, writable: renews before anything else", cluster().me("db1").primary(), Lead, "", true, "renew before writing"},
		{"holder without a deadline of its own, paused: renews only", cluster().me("db1").paused(), Lead, "", true, "change nothing"},
		{"holder without a deadline of its own, identity not recorded: renews first", cluster().me("db1").uninitialized(), Lead, "", true, "renew before writing"},
		{"leader whose mysqld died releases", cluster().me("db1").deadlineIn(3 * time.Second).primary().localDown(), ReleaseLock, "", false, "mysqld is down"},
		{"leader whose mysqld hangs keeps the lock", cluster().me("db1").deadlineIn(3 * time.Second).primary().localHung(), Lead, "", true, "may resume writable"},
		{"stopping leader hands over to best replica", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().gtid("db2", "0-1-99"), Switchover, "db3", false, "agent stopping"},
		{"stopping leader passes over a replica a hand-over failed with", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().gtid("db2", "0-1-99").
			failedTarget("db3"), Switchover, "db2", false, "agent stopping"},
		{"stopping leader whose hand-overs all failed releases", cluster().me("db1").deadlineIn(3 * time.Second).primary().stopping().
			failedTarget("db3").failedTarget("db2"), ReleaseLock, "", false, "db2: a hand-over to it did not complete; db3: a hand-over to it did not complete"},
		{"stopping leader with no eligible replica releases", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().
			with("db2", func(m *Member) { m.Healthy = false }).with("db3", func(m *Member) { m.NoFailover = true }), ReleaseLock, "", false, "no replica can take over (db2: its mysqld is down; db3: it is tagged nofailover)"},

		// Leader lost.
		{"leader lost, best candidate races at once", cluster().expired().gtid("db3", "0-1-95"), Acquire, "", false, "best candidate"},
		{"leader lost, worse candidate waits", cluster().expired().gtid("db2", "0-1-95"), WaitForBetter, "db3", false, "better candidate"},
		{"leader lost, worse candidate races after grace", cluster().expired().gtid("db2", "0-1-95").leaderlessFor(3 * time.Second), Acquire, "", false, "has not taken over"},
		{"leader lost, within grace still waits", cluster().expired().gtid("db2", "0-1-95").leaderlessFor(2 * time.Second), WaitForBetter, "db3", false, ""},
		{"leader lost, dead leader's record ranks too but cannot win", cluster().expired().gtid("db1", "0-1-200").with("db1", func(m *Member) { m.Healthy = false }), Acquire, "", false, "best"},
		{"leader lost and my mysqld is down", cluster().expired().localDown(), Idle, "", false, "mysqld is down"},
		{"leader lost, no record of mine yet", cluster().expired().drop("db2"), Idle, "", false, "not published"},
		{"leader lost, my GTIDs unreadable", cluster().expired().gtid("db2", "garbage"), Idle, "", false, "cannot be read"},

		// Stale member data.
		{"stale better member is not waited for", cluster().expired().gtid("db3", "0-1-200").with("db3", leftover), Acquire, "", false, "best"},

		// Data before eligibility, leaderless: a member we cannot read now
		// whose fresh record holds more is waited for (a cold start brings
		// members back seconds apart), for DataWait at most.
		{"cold start: a silent member whose record holds more is waited for", cluster().leader("").gtid("db3", "0-1-200").with("db3", silent),
			WaitForBetter, "db3", false, "db3 cannot be read now, but its record says it holds 100 transactions we lack"},
		{"cold start: the wait outlasts the grace period", cluster().leader("").gtid("db3", "0-1-200").with("db3", silent).leaderlessFor(5 * time.Second),
			WaitForBetter, "db3", false, "25s more at most"},
		{"cold start: an agent up whose mysqld is not yet is waited for", cluster().leader("").gtid("db3", "0-1-200").with("db3", func(m *Member) { m.Healthy, m.StartingUp = false, true }),
			WaitForBetter, "db3", false, "db3 cannot be read now"},
		{"a running agent's dead mysqld is not waited for", cluster().leader("").gtid("db3", "0-1-200").with("db3", func(m *Member) { m.Healthy = false }),
			WaitForBetter, "db1", false, "db1 is the better candidate"},
		{"cold start: the wait ends after DataWait", cluster().leader("").gtid("db3", "0-1-200").with("db3", silent).leaderlessFor(30 * time.Second),
			Acquire, "", false, "best"},
		{"cold start: a member that released the lock is waited for", cluster().leader("").gtid("db1", "0-1-200").with("db1", silent),
			WaitForBetter, "db1", false, "db1 cannot be read now"},
		{"an expired holder is presumed dead, not waited for", cluster().expired().gtid("db1", "0-1-200").with("db1", silent),
			Acquire, "", false, "best"},
		{"a silent member holding more only in its errant transactions is not waited for", cluster().leader("").gtid("db3", "0-1-200").
			with("db3", func(m *Member) { silent(m); m.Errant, m.ErrantGTIDs = true, "0-1-101,0-1-102,0-1-200" }), WaitForBetter, "db1", false, "db1 is the better candidate"},
		{"a silent member being rebuilt is not waited for", cluster().leader("").gtid("db3", "0-1-200").with("db3", func(m *Member) { silent(m); rebuilding(m) }),
			WaitForBetter, "db1", false, "db1 is the better candidate"},
		{"a silent member holding nothing more is not waited for", cluster().leader("").with("db1", silent).with("db3", silent), Acquire, "", false, "best"},
		{"my own status stale: do not race", cluster().expired().with("db2", func(m *Member) { m.Fresh = false }), Idle, "", false, "stale"},

		// Errant member.
		{"errant member does not race", cluster().expired().with("db2", func(m *Member) { m.Errant = true }), Idle, "", false, "errant"},
		{"errant better member is passed over", cluster().expired().me("db3").gtid("db2", "0-1-150").with("db2", func(m *Member) { m.Errant = true }), Acquire, "", false, "best"},
		{"misconfigured better member is passed over", cluster().expired().me("db3").gtid("db2", "0-1-150").with("db2", func(m *Member) { m.Misconfigured = "log_bin is OFF" }), Acquire, "", false, "best"},
		{"misconfigured member does not race", cluster().expired().with("db2", func(m *Member) { m.Misconfigured = "log_bin is OFF" }), Idle, "", false, "could not serve replicas: log_bin is OFF"},

		// A member being rebuilt (agentctl reinit): its data is about to be
		// replaced, so it is nobody's successor.
		{"rebuilding member does not race", cluster().expired().with("db2", rebuilding), Idle, "", false, "being rebuilt"},
		{"rebuilding better member is passed over", cluster().expired().me("db3").gtid("db2", "0-1-150").with("db2", rebuilding), Acquire, "", false, "best"},
		{"stopping leader does not hand over to a rebuilding replica", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().
			gtid("db3", "0-1-99").with("db2", rebuilding), Switchover, "db3", false, "agent stopping"},
		{"stopping leader whose only replica is rebuilding releases", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().
			drop("db3").with("db2", rebuilding), ReleaseLock, "", false, "no replica"},
		{"restarting member does not race", cluster().expired().with("db2", restarting), Idle, "", false, "being restarted"},
		{"restarting better member is passed over", cluster().expired().me("db3").gtid("db2", "0-1-150").with("db2", restarting), Acquire, "", false, "best"},
		{"stopping leader does not hand over to a restarting replica", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().
			gtid("db3", "0-1-99").with("db2", restarting), Switchover, "db3", false, "agent stopping"},
		{"switchover to a restarting member is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "db2", 0).
			with("db2", restarting), RejectSwitchover, "", false, "being restarted"},
		{"switchover to a rebuilding member is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "db2", 0).
			with("db2", rebuilding), RejectSwitchover, "", false, "being rebuilt"},
		{"switchover to the best replica passes over a rebuilding one", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("db1", "", 0).
			gtid("db3", "0-1-99").with("db2", rebuilding), Switchover, "db3", false, "best replica"},
		{"manual failover to a rebuilding member is refused", cluster().expired().switchover("", "db2", 0).with("db2", rebuilding), Idle, "", false, "being rebuilt"},

		// nofailover tag.
		{"nofailover member does not race", cluster().expired().with("db2", func(m *Member) { m.NoFailover = true }), Idle, "", false, "nofailover"},
		{"nofailover better member is passed over", cluster().expired().me("db3").gtid("db2", "0-1-150").with("db2", func(m *Member) { m.NoFailover = true }), Acquire, "", false, "best"},

		// Lagging member.
		{"lagging member does not race", cluster().expired().with("db2", func(m *Member) { m.Lag = lag(time.Minute) }), Idle, "", false, "exceeds maximum_lag_on_failover"},
		{"lag at the limit is allowed", cluster().expired().with("db2", func(m *Member) { m.Lag = lag(30 * time.Second) }).gtid("db2", "0-1-101"), Acquire, "", false, ""},
		{"broken replication does not race", cluster().expired().with("db2", func(m *Member) { m.ReplicationBroken = true }), Idle, "", false, "broken"},

		// Paused cluster.
		{"paused leader keeps the lock, changes nothing", cluster().me("db1").deadlineIn(time.Second).primary().paused(), Lead, "", true, "paused"},
		{"paused leader with mysqld down keeps the lock", cluster().me("db1").deadlineIn(time.Second).primary().paused().localDown(), Idle, "", false, "mysqld is down"},
		{"paused replica does not race for a lost lock", cluster().expired().paused(), Idle, "", false, "paused"},
		{"paused leader past deadline still fences", cluster().me("db1").deadlineIn(-time.Second).primary().paused(), FenceSelf, "", false, ""},

		// Pending switchover.
		{"switchover to a named member", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "db3", 0), Switchover, "db3", false, "requested"},
		{"switchover to the best replica", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("db1", "", 0).gtid("db2", "0-1-99"), Switchover, "db3", false, "best replica"},
		{"scheduled switchover waits", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "db3", time.Minute), Lead, "", false, ""},
		{"switchover for another leader is ignored", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("db3", "db2", 0), Lead, "", false, ""},
		{"switchover to an unknown member is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "db9", 0), RejectSwitchover, "", false, "not a member"},
		{"switchover to the leader itself is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("db1", "db1", 0), RejectSwitchover, "", false, "already the leader"},
		{"switchover to a lagging member is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "db2", 0).
			with("db2", func(m *Member) { m.Lag = lag(time.Hour) }), RejectSwitchover, "", false, "not eligible"},
		{"switchover with no eligible replica is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("", "", 0).
			with("db2", func(m *Member) { m.Errant = true }).with("db3", func(m *Member) { m.Healthy = false }), RejectSwitchover, "", false, "no replica"},
		// Manual failover (agentctl failover --to).
		{"manual failover target races", cluster().expired().switchover("", "db2", 0).gtid("db3", "0-1-101"), Acquire, "", false, "manual failover"},
		{"others wait for the manual failover target", cluster().expired().me("db3").gtid("db3", "0-1-101").switchover("", "db2", 0), WaitForBetter, "db2", false, "manual failover"},
		{"others race once the target failed to act", cluster().expired().me("db3").gtid("db3", "0-1-101").switchover("", "db2", 0).leaderlessFor(5 * time.Second), Acquire, "", false, ""},
		{"lagging manual target refused", cluster().expired().switchover("", "db2", 0).with("db2", func(m *Member) { m.Lag = lag(time.Hour) }), Idle, "", false, "refused"},
		{"forced manual target with lag and errant transactions", cluster().expired().with("db2", func(m *Member) { m.Lag = lag(time.Hour); m.Errant = true }).
			switchover("", "db2", 0).force(), Acquire, "", false, "manual failover"},
		{"fulfilled manual failover is cleared", cluster().me("db2").leader("db2").deadlineIn(3*time.Second).primary().switchover("", "db2", 0), ClearRequest, "", false, "complete"},
		{"replica ignores a pending switchover", cluster().switchover("", "db2", 0), Follow, "db1", false, ""},

		// Identity.
		{"refuse: duplicate identity", cluster().duplicate(), Refuse, "", false, "duplicate identity"},
		{"duplicate record while holding our lock: the real member goes on", cluster().me("db1").deadlineIn(3 * time.Second).primary().duplicate(), Lead, "", false, "holding"},
		{"lock names us with another instance: fence at once", cluster().me("db1").deadlineIn(3 * time.Second).primary().leaderInstance("b"), FenceSelf, "", false, "another agent instance"},
		{"lock names us with another instance, not ours: wait", cluster().me("db1").leaderInstance("b"), Idle, "", false, "another agent instance"},
		{"lock vanished while held: fence at once", cluster().me("db1").leader("").deadlineIn(3 * time.Second).primary(), FenceSelf, "", false, "nobody holds it"},
		{"lock held by another while we held it: fence at once", cluster().me("db1").leader("db3").deadlineIn(3 * time.Second).primary(), FenceSelf, "", false, "held by db3"},

		// Never writable without the lock.
		{"writable without the lock: fence", cluster().primary(), FenceSelf, "", false, "writable without the lock"},
		{"writable without the lock while leaderless: fence", cluster().expired().primary(), FenceSelf, "", false, "writable without the lock"},
		{"paused: a writable replica is left alone", cluster().paused().primary(), Idle, "", false, "paused"},

		// An unreadable config or switchover record.
		{"config unreadable: no failover", cluster().expired().configUnknown(), Idle, "", false, "unreadable"},
		{"config unreadable: the leader keeps the lock and changes nothing", cluster().me("db1").deadlineIn(3 * time.Second).primary().configUnknown(), Lead, "", true, "unreadable"},
		{"unreadable switchover record is cleared", cluster().me("db1").deadlineIn(3 * time.Second).primary().switchoverUnreadable(), RejectSwitchover, "", false, "unreadable"},

		// Following.
		{"replica follows the holder", cluster(), Follow, "db1", false, "following"},
		{"replica whose mysqld is down idles", cluster().localDown(), Idle, "", false, "down"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.snap.s)
			if got.Kind != c.kind || got.Target != c.target || got.RenewOnly != c.renew || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("Decide = %+v (%s), want kind %s target %q renewOnly %v reason containing %q",
					got, got.Kind, c.kind, c.target, c.renew, c.reason)
			}
		})
	}
}

// promoting is db2 holding the lock of a lost db1, still a read-only
// replica of it, with every peer probed.
func promoting() *snap {
	b := cluster().me("db2").leader("db2").deadlineIn(3 * time.Second)
	b.s.SelfAddr, b.s.LocalSource, b.s.FormerLeader = "10.0.0.2:3306", "10.0.0.1:3306", "db1"
	return b.observed(func(*Member) {})
}

// actionCase is a decision test that checks every field of the action but
// its reason.
type actionCase struct {
	name string
	snap *snap
	want Action
}

func runActionCases(t *testing.T, cases []actionCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.snap.s)
			reason := got.Reason
			got.Reason = ""
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Decide = %+v (%s), want %+v", got, reason, c.want)
			}
		})
	}
}

// TestDecideLeaderSafety covers the leader's and the promoting candidate's
// split-brain rules, with every field of the action.
func TestDecideLeaderSafety(t *testing.T) {
	cases := []actionCase{
		{"leader fences another writable member every iteration",
			cluster().me("db1").deadlineIn(3 * time.Second).primary().observed(func(m *Member) { m.Writable = m.Name == "db3" }),
			Action{Kind: Lead, Fence: []string{"db3"}}},
		{"leader with read-only peers fences nobody",
			cluster().me("db1").deadlineIn(3 * time.Second).primary().observed(func(*Member) {}),
			Action{Kind: Lead}},
		{"stop promotion: old source unfenced",
			promoting().with("db1", func(m *Member) { m.Writable = true }),
			Action{Kind: Promote, Fence: []string{"db1"}}},
		{"promotion stops receivers pulling from an unreachable source first",
			promoting().with("db3", func(m *Member) { m.PullingFrom = "10.0.0.1:3306" }).with("db1", func(m *Member) { m.Reachable = false }),
			Action{Kind: Promote, StopReceivers: []string{"db3"}}},
		{"and receivers pulling from a writable source, which it fences",
			promoting().with("db3", func(m *Member) { m.PullingFrom = "10.0.0.1:3306" }).with("db1", func(m *Member) { m.Writable = true }),
			Action{Kind: Promote, Fence: []string{"db1"}, StopReceivers: []string{"db3"}}},
		{"a receiver pulling from a source that answered read-only runs on: it can acknowledge nothing new",
			promoting().with("db3", func(m *Member) { m.PullingFrom = "10.0.0.1:3306" }),
			Action{Kind: Promote, Unfence: true}},
		{"a receiver pulling from us is left alone",
			promoting().with("db3", func(m *Member) { m.PullingFrom = "10.0.0.2:3306" }),
			Action{Kind: Promote, Unfence: true}},
		{"all fenced: unfence",
			promoting(),
			Action{Kind: Promote, Unfence: true}},
		{"old source provably down: unfence",
			promoting().with("db1", func(m *Member) { m.Reachable, m.Down = false, true }),
			Action{Kind: Promote, Unfence: true}},
		{"old source unreachable: unfence, relying on its own self-fence",
			promoting().with("db1", func(m *Member) { m.Reachable = false }),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db1"}}},
		{"a reachable eligible peer with transactions we lack: let it take over",
			promoting().gtid("db3", "0-1-101"),
			Action{Kind: ReleaseLock, Target: "db3", StandDown: true}},
		{"an unreachable peer's record does not block",
			promoting().gtid("db3", "0-1-101").with("db3", func(m *Member) { m.Reachable = false }),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db3"}}},
		{"an errant peer's extra transactions do not block",
			promoting().gtid("db3", "0-1-101").with("db3", func(m *Member) { m.Errant = true }),
			Action{Kind: Promote, Unfence: true}},
		{"the former leader's extra transactions do not block",
			promoting().gtid("db1", "0-1-200"),
			Action{Kind: Promote, Unfence: true}},
		{"equal data: the tie-break does not move the lock",
			promoting().me("db3").leader("db3").with("db2", func(m *Member) { m.Priority = 9 }),
			Action{Kind: Promote, Unfence: true}},
		{"forced manual failover ignores a better peer",
			promoting().gtid("db3", "0-1-101").switchover("", "db2", 0).force(),
			Action{Kind: Promote, Unfence: true}},
		{"a promotion that cannot complete gives the lock up after its bound",
			promoting().promotingFor(61*time.Second, time.Minute),
			Action{Kind: ReleaseLock, StandDown: true}},
		{"within the bound it keeps trying",
			promoting().promotingFor(59*time.Second, time.Minute),
			Action{Kind: Promote, Unfence: true}},
	}
	runActionCases(t, cases)
}

// TestDecideDataBeforeEligibility: before unfencing, the holder takes every
// transaction any reachable member holds, whatever keeps that member from
// leading, or does not unfence. Each case is a member that may not lead
// holding a write nobody else has.
func TestDecideDataBeforeEligibility(t *testing.T) {
	ahead := func(f func(*Member)) func(*Member) {
		return func(m *Member) { m.Executed = "0-1-101"; f(m) }
	}
	nofailover := func(m *Member) { m.NoFailover = true }
	mysql := func(b *snap) *snap {
		b.s.Flavor = gtid.MySQL
		for i := range b.s.Members {
			b.s.Members[i].Executed = u1 + ":1-100"
		}
		return b
	}
	// MariaDB binlog states: we (db2) kept an old primary's tail 0-2-101..
	// 0-2-105 that nobody acknowledged, while db3 followed the new
	// primary db1's acknowledged 0-1-101..0-1-103: by position we look
	// ahead, by state the histories forked.
	forked := func(b *snap) *snap {
		b.s.Members[1].Executed, b.s.Members[1].BinlogState = "0-2-105", "0-1-100,0-2-105"
		b.s.Members[2].Executed, b.s.Members[2].BinlogState = "0-1-103", "0-1-103"
		return b
	}
	cases := []actionCase{
		{"MariaDB, our position ahead but the histories forked: do not unfence",
			forked(promoting().lossless()), Action{Kind: Promote}},
		{"asynchronous mode: a fork costs one branch either way; do not wait",
			forked(promoting()), Action{Kind: Promote, Unfence: true}},
		{"the same peer's forked transactions known errant do not count",
			forked(promoting().lossless()).with("db3", func(m *Member) { m.Errant, m.ErrantGTIDs = true, "0-1-103" }),
			Action{Kind: Promote, Unfence: true}},
		{"binlog states that agree: a peer behind holds nothing we lack",
			forked(promoting().lossless()).with("db3", func(m *Member) { m.Executed, m.BinlogState = "0-2-104", "0-1-100,0-2-104" }),
			Action{Kind: Promote, Unfence: true}},
		{"a nofailover member holds a write we lack: take it from it first",
			promoting().with("db3", ahead(nofailover)),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"the same in lossless mode, where it may be the write's only acknowledger",
			promoting().lossless().with("db3", ahead(nofailover)),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"a member whose agent is silent while its mysqld answers",
			promoting().with("db3", ahead(func(m *Member) { m.Fresh = false })),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"an asynchronous member in lossless mode (it may not lead, but its data counts)",
			promoting().lossless().with("db3", ahead(async)),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"the former leader, read-only but not our source",
			promoting().with("db1", ahead(func(m *Member) { m.Addr = "10.0.0.9:3306" })),
			Action{Kind: Promote, CatchUpFrom: "db1", CatchUpTo: "0-1-101"}},
		{"a write still in its relay log, applied by a running SQL thread: wait for all of it",
			promoting().with("db3", func(m *Member) { m.NoFailover, m.Retrieved = true, "0-1-103" }),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-103"}},
		{"the member furthest ahead first",
			promoting().with("db3", ahead(nofailover)).with("db1", func(m *Member) { m.Executed = "0-1-102" }).
				with("db1", func(m *Member) { m.Addr = "10.0.0.9:3306" }),
			Action{Kind: Promote, CatchUpFrom: "db1", CatchUpTo: "0-1-102"}},
		{"caught up from it, it is our fenced source: the promotion's first step takes the rest",
			promoting().with("db3", ahead(nofailover)).local("10.0.0.3:3306"),
			Action{Kind: Promote, Unfence: true}},
		{"our source with a write in its relay log: wait for the relay log too",
			promoting().with("db3", func(m *Member) { m.NoFailover, m.Retrieved = true, "0-1-101" }).local("10.0.0.3:3306"),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"a write only in the relay log of a broken SQL thread cannot be fetched: do not unfence",
			promoting().with("db3", func(m *Member) { m.ReplicationBroken, m.Retrieved = true, "0-1-101" }),
			Action{Kind: Promote}},
		{"a broken member's applied writes are still fetched",
			promoting().with("db3", func(m *Member) { m.ReplicationBroken, m.Executed, m.Retrieved = true, "0-1-101", "0-1-104" }),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"a member without a binary log cannot serve its writes: do not unfence",
			promoting().with("db3", ahead(func(m *Member) { m.Misconfigured = "log_bin is OFF" })),
			Action{Kind: Promote}},
		{"an errant member's errant transactions do not count (MariaDB: its errant domain)",
			promoting().with("db3", ahead(func(m *Member) { m.Errant, m.ErrantGTIDs = true, "0-3-101" })),
			Action{Kind: Promote, Unfence: true}},
		{"MySQL: an errant member's errant transactions do not count",
			mysql(promoting()).with("db3", func(m *Member) { m.Executed, m.Errant, m.ErrantGTIDs = u1+":1-100,"+u2+":1", true, u2+":1" }),
			Action{Kind: Promote, Unfence: true}},
		{"MySQL: an errant member that also holds a write we lack: do not unfence, nor copy its errant ones",
			mysql(promoting()).with("db3", func(m *Member) { m.Executed, m.Errant, m.ErrantGTIDs = u1+":1-101,"+u2+":1", true, u2+":1" }),
			Action{Kind: Promote}},
		{"MySQL: a nofailover member's write is taken as a set",
			mysql(promoting()).with("db3", func(m *Member) { m.NoFailover, m.Executed = true, u1+":1-101" }),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: u1 + ":1-101"}},
		{"an unreachable member is not judged here (its agent self-fences)",
			promoting().with("db3", ahead(func(m *Member) { m.NoFailover, m.Reachable = true, false })),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db3"}}},
		{"a forced manual failover takes what it has",
			promoting().with("db3", ahead(nofailover)).switchover("", "db2", 0).force(),
			Action{Kind: Promote, Unfence: true}},
	}
	runActionCases(t, cases)
}

// TestDecideLossless covers semi_sync strict: an acknowledged transaction is
// on the dead primary and on at least one acknowledging replica, so only a
// candidate that has seen every acknowledging replica's data may unfence.
func TestDecideLossless(t *testing.T) {
	cases := []actionCase{
		{"an asynchronous replica may not take over, however far ahead",
			cluster().expired().lossless().gtid("db3", "0-1-101").with("db3", async),
			Action{Kind: Acquire}},
		{"without lossless mode it would",
			cluster().expired().gtid("db3", "0-1-101").with("db3", async),
			Action{Kind: WaitForBetter, Target: "db3"}},
		{"an asynchronous member does not race at all",
			cluster().expired().lossless().with("db2", async),
			Action{Kind: Idle}},
		{"every acknowledging peer answered: unfence",
			promoting().lossless(),
			Action{Kind: Promote, Unfence: true}},
		{"an acknowledging peer does not answer: hold, it may have acknowledged what we lack",
			promoting().lossless().with("db3", func(m *Member) { m.Reachable = false }),
			Action{Kind: Promote}},
		{"an acknowledging peer whose mysqld is down: hold, its relay log may have what we lack",
			promoting().lossless().with("db3", func(m *Member) { m.Reachable, m.Down = false, true }),
			Action{Kind: Promote}},
		{"an acknowledging peer not probed: hold",
			promoting().lossless().with("db3", func(m *Member) { m.Observed, m.Reachable = false, false }),
			Action{Kind: Promote}},
		{"the old primary unreachable does not hold: it acknowledged nothing",
			promoting().lossless().with("db1", func(m *Member) { m.Reachable, m.Primary = false, true }),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db1"}}},
		{"a former lock holder that never became primary may have acknowledged another's writes: hold",
			promoting().lossless().with("db1", func(m *Member) { m.Reachable = false }),
			Action{Kind: Promote}},
		{"a member recorded as primary unreachable does not hold",
			promoting().lossless().with("db3", func(m *Member) { m.Reachable, m.Primary = false, true }),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db3"}}},
		{"an asynchronous peer unreachable does not hold",
			promoting().lossless().with("db3", func(m *Member) { m.Reachable, m.Async = false, true }),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db3"}}},
		{"an asynchronous peer ahead of us does not take the lock, but what it holds is taken (or it would be left errant)",
			promoting().lossless().gtid("db3", "0-1-101").with("db3", async),
			Action{Kind: Promote, CatchUpFrom: "db3", CatchUpTo: "0-1-101"}},
		{"a leftover record (stale, unreachable) the old primary did not list does not hold",
			promoting().lossless().with("db3", leftover).with("db1", acknowledgers("db2")),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db3"}}},
		{"listed by the old primary: hold, stale or not",
			promoting().lossless().with("db3", leftover).with("db1", acknowledgers("db2", "db3")),
			Action{Kind: Promote}},
		{"not listed but its record is fresh (it may have joined since): hold",
			promoting().lossless().with("db3", func(m *Member) { m.Reachable = false }).with("db1", acknowledgers("db2")),
			Action{Kind: Promote}},
		{"the old primary published no list (an older agent): hold",
			promoting().lossless().with("db3", leftover),
			Action{Kind: Promote}},
		{"no list, but the leftover's pod is gone (scaled away): it does not hold",
			promoting().lossless().with("db3", func(m *Member) { leftover(m); m.Removed = true }),
			Action{Kind: Promote, Unfence: true}},
		{"listed, but its pod is gone since: it does not hold",
			promoting().lossless().with("db3", func(m *Member) { leftover(m); m.Removed = true }).with("db1", acknowledgers("db2", "db3")),
			Action{Kind: Promote, Unfence: true}},
		{"a forced manual failover overrides",
			promoting().lossless().with("db3", func(m *Member) { m.Reachable = false }).switchover("", "db2", 0).force(),
			Action{Kind: Promote, Unfence: true, Unverified: []string{"db3"}}},
		{"a lock held without a renewal of ours: renew, then decide again at once",
			cluster().me("db1").primary(), Action{Kind: Lead, RenewOnly: true, DecideAgain: true}},
		{"paused: renew, and nothing to decide again",
			cluster().me("db1").primary().paused(), Action{Kind: Lead, RenewOnly: true}},
	}
	runActionCases(t, cases)
}

// TestDecideHungMySQL: a holder whose mysqld hangs cannot fence it. It
// keeps the lock, unless the hang outlasts the bound and the server can be
// made harmless: killed (then it is down, and the lock is released), or,
// in lossless mode, left unable to acknowledge once the new primary stops
// the receivers.
func TestDecideHungMySQL(t *testing.T) {
	leader := func() *snap { return cluster().me("db1").deadlineIn(3 * time.Second).primary() }
	cases := []actionCase{
		{"hung within the bound: keep the lock", leader().hungFor(4*time.Second, 5*time.Second).canKill(),
			Action{Kind: Lead, RenewOnly: true}},
		{"hung past the bound, can kill: kill it", leader().hungFor(5*time.Second, 5*time.Second).canKill(),
			Action{Kind: KillLocal}},
		{"hung past the bound, cannot kill: keep the lock", leader().hungFor(time.Minute, 5*time.Second),
			Action{Kind: Lead, RenewOnly: true}},
		{"lossless, hung past the bound, cannot kill: release it unfenced", leader().lossless().hungFor(5*time.Second, 5*time.Second),
			Action{Kind: ReleaseLock, Unfenced: true}},
		{"lossless, can kill: kill first", leader().lossless().hungFor(5*time.Second, 5*time.Second).canKill(),
			Action{Kind: KillLocal}},
		{"no bound: keep the lock", leader().lossless().hungFor(time.Hour, 0).canKill(),
			Action{Kind: Lead, RenewOnly: true}},
		{"paused: change nothing", leader().paused().hungFor(time.Minute, 5*time.Second).canKill(),
			Action{Kind: Idle}},
		{"a replica whose mysqld hangs does nothing", cluster().hungFor(time.Minute, 5*time.Second).canKill(),
			Action{Kind: Idle}},
	}
	runActionCases(t, cases)
}

// TestDecideTakeOver: in lossless mode, a leader whose agent and
// replication stream a majority has lost for the confirmation window is
// replaced before its ttl, by the best candidate only.
func TestDecideTakeOver(t *testing.T) {
	dead := func() *snap { return cluster().lossless().confirmedDead() }
	runActionCases(t, []actionCase{
		{"the best candidate takes the lock over", dead().gtid("db2", "0-1-101"), Action{Kind: TakeOver, Target: "db1"}},
		{"equal data: the tie-break picks db2", dead(), Action{Kind: TakeOver, Target: "db1"}},
		{"another is better: keep following", dead().gtid("db3", "0-1-101"), Action{Kind: Follow, Target: "db1"}},
		{"not eligible: keep following", dead().gtid("db2", "0-1-101").with("db2", async), Action{Kind: Follow, Target: "db1"}},
		{"being rebuilt: keep following", dead().gtid("db2", "0-1-101").with("db2", rebuilding), Action{Kind: Follow, Target: "db1"}},
		{"async mode never does", cluster().confirmedDead().gtid("db2", "0-1-101"), Action{Kind: Follow, Target: "db1"}},
		{"not confirmed: follow", cluster().lossless().gtid("db2", "0-1-101"), Action{Kind: Follow, Target: "db1"}},
		{"paused: follow", dead().paused().gtid("db2", "0-1-101"), Action{Kind: Idle}},
		{"a live failsafe promise to another leader holds us back", dead().gtid("db2", "0-1-101").failsafeLeader("db3"),
			Action{Kind: Follow, Target: "db1"}},
		{"nor to the confirmed-dead holder itself", dead().gtid("db2", "0-1-101").failsafeLeader("db1"),
			Action{Kind: Follow, Target: "db1"}},
	})
}

// TestDecideDeathQuorum: who counts towards the majority that confirms a
// holder dead.
func TestDecideDeathQuorum(t *testing.T) {
	lossless := func() *snap { return cluster().lossless().gtid("db2", "0-1-101") }
	takeOver, follow := Action{Kind: TakeOver, Target: "db1"}, Action{Kind: Follow, Target: "db1"}
	five := func() *snap {
		b := lossless()
		b.s.Members = append(b.s.Members, member("db4", "0-1-100"), member("db5", "0-1-100"))
		return b
	}
	runActionCases(t, []actionCase{
		{"we and one peer of three: a majority", lossless().lostBy(time.Second, "db2", "db3"), takeOver},
		{"we alone: no majority", lossless().lostBy(time.Second, "db2"), follow},
		{"the others without us: we may still stream from it", five().lostBy(time.Second, "db3", "db4", "db5"), follow},
		{"lost for less than the window", lossless().lostBy(900*time.Millisecond, "db2", "db3"), follow},
		{"ours long enough, the peer's not", lossless().lostBy(time.Second, "db2").lostBy(500*time.Millisecond, "db3"), follow},
		{"a report counts once", five().lostBy(time.Second, "db2", "db3", "db3"), follow},
		{"the holder's own report does not count", lossless().lostBy(time.Second, "db2", "db1"), follow},
		{"two of five: no majority", five().lostBy(time.Second, "db2", "db3"), follow},
		{"three of five", five().lostBy(time.Second, "db2", "db3", "db4"), takeOver},
		{"a report about an earlier instance of the holder", lossless().leaderInstance("i2").lostBy(time.Second, "db2").
			also(LossReport{Member: "db3", Leader: "db1", Instance: "i1", LostFor: time.Minute}), follow},
		{"a report about another holder", lossless().lostBy(time.Second, "db2").
			also(LossReport{Member: "db3", Leader: "db3", LostFor: time.Minute}), follow},
	})
}

func (b *snap) also(r LossReport) *snap { b.s.LeaderLost = append(b.s.LeaderLost, r); return b }

// TestDecidePodDown: in any mode, a holder whose pod the kubelet reports
// with every container stopped (its agent and stream lost by us) is taken
// over before its ttl, by the best candidate only; a promise holds it back.
func TestDecidePodDown(t *testing.T) {
	down := func() *snap {
		b := cluster().gtid("db2", "0-1-101")
		b.s.LeaderPodDown = "mariadb: terminated (Error, exit 137); agent: terminated (Error, exit 137)"
		return b
	}
	takeOver, follow := Action{Kind: TakeOver, Target: "db1"}, Action{Kind: Follow, Target: "db1"}
	runActionCases(t, []actionCase{
		{"async: the best candidate takes the lock over", down(), takeOver},
		{"lossless too, without a majority's reports", down().lossless(), takeOver},
		{"another is better: keep following", down().gtid("db3", "0-1-102"), follow},
		{"not eligible: keep following", down().with("db2", func(m *Member) { m.NoFailover = true }), follow},
		{"no report from the kubelet: follow until the ttl", cluster().gtid("db2", "0-1-101"), follow},
		{"paused: change nothing", down().paused(), Action{Kind: Idle}},
		{"a failsafe promise holds us back", down().failsafeLeader("db1"), follow},
		{"not initialized: nothing to take over", down().uninitialized(), follow},
	})
	a := Decide(down().s)
	if !strings.Contains(a.Reason, "kubelet reports its pod's containers stopped (mariadb: terminated") {
		t.Fatalf("reason %q does not say what the kubelet reported", a.Reason)
	}
}

// TestDecideFailsafe: while the DCS is unreachable, a leader whose every
// member confirmed it over HTTP keeps leading although its view of the lock
// has gone stale, and a member that confirmed does not race.
func TestDecideFailsafe(t *testing.T) {
	leader := func() *snap { return cluster().me("db1").deadlineIn(3 * time.Second).primary().expired() }
	cases := []actionCase{
		{"stale view of our own lock, confirmed by every member: lead on",
			leader().failsafeHeld(), Action{Kind: Lead}},
		{"without the confirmation: fence",
			leader(), Action{Kind: FenceSelf}},
		{"a confirmation does not keep a lock another holds",
			leader().leader("db2").failsafeHeld(), Action{Kind: FenceSelf}},
		{"a member that confirmed db1 does not race for its expired lock",
			cluster().expired().gtid("db2", "0-1-101").failsafeLeader("db1"), Action{Kind: Follow, Target: "db1"}},
		{"without a confirmation it races",
			cluster().expired().gtid("db2", "0-1-101"), Action{Kind: Acquire}},
	}
	runActionCases(t, cases)
}

func TestRankCandidates(t *testing.T) {
	cases := []struct {
		name    string
		flavor  gtid.Flavor
		members []Member
		want    []string
	}{
		{"mariadb: highest sequence first", gtid.MariaDB,
			[]Member{member("a", "0-1-10"), member("b", "0-1-12"), member("c", "0-1-11")}, []string{"b", "c", "a"}},
		{"mariadb: retrieved counts too", gtid.MariaDB,
			[]Member{member("a", "0-1-10"), {Name: "b", Fresh: true, Healthy: true, Executed: "0-1-9", Retrieved: "0-1-13"}}, []string{"b", "a"}},
		{"priority breaks a tie", gtid.MariaDB,
			[]Member{member("a", "0-1-10"), {Name: "b", Fresh: true, Healthy: true, Executed: "0-1-10", Priority: 5}}, []string{"b", "a"}},
		{"history beats priority", gtid.MariaDB,
			[]Member{member("a", "0-1-11"), {Name: "b", Fresh: true, Healthy: true, Executed: "0-1-10", Priority: 5}}, []string{"a", "b"}},
		{"mariadb: less left to apply breaks a tie of histories", gtid.MariaDB,
			[]Member{{Name: "a", Fresh: true, Healthy: true, Executed: "0-1-2", Retrieved: "0-1-13"}, {Name: "b", Fresh: true, Healthy: true, Executed: "0-1-12", Retrieved: "0-1-13"}},
			[]string{"b", "a"}},
		{"mysql: less left to apply breaks a tie of histories", gtid.MySQL,
			[]Member{{Name: "a", Fresh: true, Healthy: true, Executed: u1 + ":1-2", Retrieved: u1 + ":3-14"}, {Name: "b", Fresh: true, Healthy: true, Executed: u1 + ":1-13", Retrieved: u1 + ":14"}},
			[]string{"b", "a"}},
		{"priority before what is left to apply", gtid.MariaDB,
			[]Member{{Name: "a", Fresh: true, Healthy: true, Executed: "0-1-2", Retrieved: "0-1-13", Priority: 5}, {Name: "b", Fresh: true, Healthy: true, Executed: "0-1-13"}},
			[]string{"a", "b"}},
		{"name breaks the last tie", gtid.MariaDB,
			[]Member{member("c", "0-1-10"), member("a", "0-1-10"), member("b", "0-1-10")}, []string{"a", "b", "c"}},
		{"mysql: superset wins", gtid.MySQL,
			[]Member{member("a", u1+":1-10"), member("b", u1+":1-12"), {Name: "c", Fresh: true, Healthy: true, Executed: u1 + ":1-10", Retrieved: u1 + ":11-14," + u2 + ":1"}},
			[]string{"c", "b", "a"}},
		{"unparsable and ineligible left out", gtid.MySQL,
			[]Member{member("a", "nonsense"), member("b", u1+":1"), {Name: "c", Executed: u1 + ":1-9"}}, []string{"b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, cand := range RankCandidates(c.flavor, c.members, Rules{}) {
				got = append(got, cand.Name)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("ranked %v, want %v", got, c.want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	if Follow.String() != "follow" || Kind(99).String() != "Kind(99)" {
		t.Error(Follow.String(), Kind(99).String())
	}
}

// TestTrackAcknowledgers: a lossless primary lists every member that may
// hold an acknowledged write no other listed member holds, and lets a
// member go only once it cannot.
func TestTrackAcknowledgers(t *testing.T) {
	streams := func(name, executed string) AckPeer { return AckPeer{Name: name, Streaming: true, Executed: executed} }
	gone := func(name string) AckPeer { return AckPeer{Name: name} }
	cases := []struct {
		name    string
		listed  map[string]string
		peers   []AckPeer
		ours    string
		clients int
		want    map[string]string
	}{
		{"streaming members join", nil, []AckPeer{streams("db2", "0-1-100"), streams("db3", "0-1-99")}, "0-1-100", 2,
			map[string]string{"db2": "", "db3": ""}},
		{"a member never seen streaming is not listed", nil, []AckPeer{streams("db2", "0-1-100"), gone("db9")}, "0-1-100", 1,
			map[string]string{"db2": ""}},
		{"a member that stops streaming stays while nobody streaming holds what it may have acknowledged",
			map[string]string{"db2": "", "db3": ""}, []AckPeer{streams("db2", "0-1-95"), gone("db3")}, "0-1-100", 1,
			map[string]string{"db2": "", "db3": "0-1-100"}},
		{"it leaves once a streaming member holds it all",
			map[string]string{"db2": "", "db3": "0-1-100"}, []AckPeer{streams("db2", "0-1-104"), gone("db3")}, "0-1-105", 1,
			map[string]string{"db2": ""}},
		{"its bound stays what it was when it stopped streaming",
			map[string]string{"db2": "", "db3": "0-1-100"}, []AckPeer{streams("db2", "0-1-99"), gone("db3")}, "0-1-105", 1,
			map[string]string{"db2": "", "db3": "0-1-100"}},
		{"more semi-sync clients than streaming members: it may still be one of them",
			map[string]string{"db2": "", "db3": "0-1-100"}, []AckPeer{streams("db2", "0-1-104"), gone("db3")}, "0-1-105", 2,
			map[string]string{"db2": "", "db3": "0-1-100"}},
		{"nobody streams: nobody leaves",
			map[string]string{"db3": "0-1-100"}, []AckPeer{gone("db2"), gone("db3")}, "0-1-100", 0,
			map[string]string{"db3": "0-1-100"}},
		{"a live member that does not stream is listed: it may start to after our last list",
			nil, []AckPeer{streams("db2", "0-1-100"), {Name: "db3", Live: true}}, "0-1-100", 1,
			map[string]string{"db2": "", "db3": ""}},
		{"and stays while live, whoever holds what it may have acknowledged",
			map[string]string{"db2": "", "db3": ""}, []AckPeer{streams("db2", "0-1-104"), {Name: "db3", Live: true}}, "0-1-104", 1,
			map[string]string{"db2": "", "db3": ""}},
		{"its agent gone, it gets the bound of what we hold now",
			map[string]string{"db2": "", "db3": ""}, []AckPeer{streams("db2", "0-1-99"), gone("db3")}, "0-1-104", 1,
			map[string]string{"db2": "", "db3": "0-1-104"}},
		{"a member streaming again is listed without a bound",
			map[string]string{"db3": "0-1-100"}, []AckPeer{streams("db3", "0-1-101")}, "0-1-101", 1,
			map[string]string{"db3": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := TrackAcknowledgers(gtid.MariaDB, c.listed, c.peers, c.ours, c.clients)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("TrackAcknowledgers = %v, want %v", got, c.want)
			}
		})
	}
	if got := FormatAcknowledgers(map[string]string{"db3": "", "db2": "x"}); got != "db2,db3" {
		t.Errorf("FormatAcknowledgers = %q", got)
	}
}

func (b *snap) fenced(names ...string) *snap {
	b.s.Rules.Fenced = strings.Join(names, ",")
	return b
}

// An operator's fence (agentctl fence): the member stays read-only and
// never leads, whatever else holds; no force lifts it.
func TestDecideOperatorFence(t *testing.T) {
	for _, c := range []struct {
		name   string
		snap   *snap
		kind   Kind
		target string
		reason string
	}{
		{"fenced leader gives the lock up", cluster().me("db1").deadlineIn(3 * time.Second).primary().fenced("db1"), ReleaseLock, "", "fenced by an operator"},
		{"fenced leader of a paused cluster keeps the lock, read-only", cluster().me("db1").deadlineIn(3 * time.Second).primary().paused().fenced("db1"), FenceSelf, "", "fenced by an operator"},
		{"fenced, read-only leader of a paused cluster renews only", cluster().me("db1").paused().fenced("db1"), Lead, "", "read-only"},
		{"fenced writable member without the lock fences itself", cluster().primary().fenced("db2"), FenceSelf, "", "fenced by an operator"},
		{"fenced replica follows", cluster().fenced("db2"), Follow, "db1", "following"},
		{"fenced best candidate does not race", cluster().expired().gtid("db2", "0-1-101").fenced("db2"), Idle, "", "it is fenced"},
		{"the others race without waiting for the fenced best candidate", cluster().expired().me("db3").gtid("db2", "0-1-101").fenced("db2").gtid("db1", "0-1-90"), Acquire, "", "best candidate"},
		{"forced manual failover to a fenced member is refused", cluster().leader("").switchover("", "db2", 0).force().fenced("db2"), Idle, "", "it is fenced"},
		{"switchover to a fenced member is rejected", cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("db1", "db2", 0).fenced("db2"), RejectSwitchover, "", "it is fenced"},
		{"stopping leader does not hand over to a fenced member", cluster().me("db1").deadlineIn(3*time.Second).primary().stopping().gtid("db2", "0-1-101").fenced("db2"), Switchover, "db3", "agent stopping"},
		{"a handed lock is given up by a fenced holder", cluster().me("db2").leader("db2").fenced("db2"), ReleaseLock, "", "fenced by an operator"},
	} {
		got := Decide(c.snap.s)
		if got.Kind != c.kind || got.Target != c.target || !strings.Contains(got.Reason, c.reason) {
			t.Errorf("%s: got %v %q (%s), want %v %q (%q)", c.name, got.Kind, got.Target, got.Reason, c.kind, c.target, c.reason)
		}
		if got.Kind == Promote && got.Unfence && c.snap.s.Rules.IsFenced(c.snap.s.Self) {
			t.Errorf("%s: a fenced member unfences", c.name)
		}
	}
}
