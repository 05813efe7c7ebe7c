package failover

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

func TestReinitDonor(t *testing.T) {
	lag := func(d time.Duration) *time.Duration { return &d }
	rep := func(name string, l *time.Duration, tags ...string) dcs.Member {
		m := dcs.Member{Name: name, Role: dcs.RoleReplica, Replication: dcs.ReplicationRunning, APIURL: "http://" + name, Lag: l}
		if len(tags) == 2 {
			m.Tags = map[string]string{tags[0]: tags[1]}
		}
		return m
	}
	broken := rep("m4", lag(0))
	broken.Replication = dcs.ReplicationBroken
	stale := rep("m5", lag(0))
	stale.Stale = true
	cl := &dcs.Cluster{
		Config: dcs.Config{MaximumLagOnFailover: 30 * time.Second},
		Leader: &dcs.Leader{Holder: "m0"},
		Members: []dcs.Member{{Name: "m0", Role: dcs.RolePrimary, APIURL: "http://m0"}, rep("m1", nil), rep("m2", lag(3*time.Second)),
			rep("m3", lag(time.Second)), broken, stale,
			rep("m6", lag(0), TagErrant, "0-6-1"), rep("m7", lag(0), TagRebuilding, "m1"), rep("m8", lag(time.Minute)),
			rep("m9", lag(0), TagLagging, "true"), rep("m10", lag(0), TagRestarting, "since 10:00:00")},
	}
	for _, tc := range []struct {
		target, donor, want string
		err                 error
	}{
		{target: "mx", want: "m3"},              // least lag
		{target: "m3", want: "m2"},              // not itself
		{target: "mx", donor: "m0", want: "m0"}, // the leader when named
		{target: "mx", donor: "m1", want: "m1"}, // unknown lag: not known to lag
		{target: "mx", donor: "m4", err: ErrNoDonor},
		{target: "mx", donor: "m5", err: ErrNoDonor},
		{target: "mx", donor: "m6", err: ErrNoDonor},  // errant
		{target: "mx", donor: "m7", err: ErrNoDonor},  // being rebuilt
		{target: "mx", donor: "m10", err: ErrNoDonor}, // restarting
		{target: "mx", donor: "m8", err: ErrNoDonor},  // lags beyond maximum_lag_on_failover
		{target: "mx", donor: "m9", err: ErrNoDonor},  // tagged lagging
		{target: "mx", donor: "nobody", err: ErrNoDonor},
		{target: "m1", donor: "m1", err: dcs.ErrInvalid},
	} {
		got, err := ReinitDonor(cl, tc.target, tc.donor)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("ReinitDonor(%s, %q) = %s, %v; want %v", tc.target, tc.donor, got.Name, err, tc.err)
			}
			continue
		}
		if err != nil || got.Name != tc.want {
			t.Errorf("ReinitDonor(%s, %q) = %s, %v; want %s", tc.target, tc.donor, got.Name, err, tc.want)
		}
	}
	// A pending request names its target: it gives nothing meanwhile.
	pending := *cl
	pending.Reinit = &dcs.Reinit{Member: "m3"}
	if got, err := ReinitDonor(&pending, "mx", ""); err != nil || got.Name != "m2" {
		t.Errorf("with m3 pending a rebuild: %s, %v; want m2", got.Name, err)
	}
	// Without a fit streaming replica, the leader gives.
	only := &dcs.Cluster{Leader: &dcs.Leader{Holder: "m0"}, Members: []dcs.Member{{Name: "m0", Role: dcs.RolePrimary, APIURL: "http://m0"}, broken, rep("m6", lag(0), TagErrant, "0-6-1")}}
	if got, err := ReinitDonor(only, "m4", ""); err != nil || got.Name != "m0" {
		t.Errorf("leader fallback: %s, %v", got.Name, err)
	}
	if _, err := ReinitDonor(&dcs.Cluster{}, "m1", ""); !errors.Is(err, ErrNoDonor) {
		t.Errorf("empty cluster: %v", err)
	}
}

func TestReinitRefusal(t *testing.T) {
	ok := ReinitTarget{CanRebuild: true, Flavor: gtid.MariaDB}
	for _, c := range []struct {
		name   string
		target ReinitTarget
		want   string
	}{
		{"a MariaDB replica with its datadir mounted", ok, ""},
		{"no --mysql-datadir", ReinitTarget{Flavor: gtid.MariaDB}, "--mysql-datadir"},
		{"the lock holder", ReinitTarget{CanRebuild: true, HoldsLock: true, Flavor: gtid.MariaDB}, "switch over first"},
		{"MySQL", ReinitTarget{CanRebuild: true, Flavor: gtid.MySQL}, "not implemented"},
	} {
		got := ReinitRefusal(c.target)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: ReinitRefusal = %q, want %q", c.name, got, c.want)
		}
	}
}
