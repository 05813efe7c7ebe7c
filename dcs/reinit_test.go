package dcs

import (
	"errors"
	"testing"
	"time"
)

func TestReinitDonor(t *testing.T) {
	lag := func(d time.Duration) *time.Duration { return &d }
	rep := func(name string, l *time.Duration) Member {
		return Member{Name: name, Role: RoleReplica, Replication: ReplicationRunning, APIURL: "http://" + name, Lag: l}
	}
	broken := rep("m4", lag(0))
	broken.Replication = ReplicationBroken
	stale := rep("m5", lag(0))
	stale.Stale = true
	cl := &Cluster{
		Leader:  &Leader{Holder: "m0"},
		Members: []Member{{Name: "m0", Role: RolePrimary, APIURL: "http://m0"}, rep("m1", nil), rep("m2", lag(3*time.Second)), rep("m3", lag(time.Second)), broken, stale},
	}
	for _, tc := range []struct {
		target, donor, want string
		err                 error
	}{
		{target: "m9", want: "m3"},              // least lag
		{target: "m3", want: "m2"},              // not itself
		{target: "m9", donor: "m0", want: "m0"}, // the leader when named
		{target: "m9", donor: "m1", want: "m1"},
		{target: "m9", donor: "m4", err: ErrNoDonor},
		{target: "m9", donor: "m5", err: ErrNoDonor},
		{target: "m9", donor: "nobody", err: ErrNoDonor},
		{target: "m1", donor: "m1", err: ErrInvalid},
	} {
		got, err := cl.ReinitDonor(tc.target, tc.donor)
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
	// Without streaming replicas, the leader gives.
	only := &Cluster{Leader: &Leader{Holder: "m0"}, Members: []Member{{Name: "m0", Role: RolePrimary, APIURL: "http://m0"}, broken}}
	if got, err := only.ReinitDonor("m4", ""); err != nil || got.Name != "m0" {
		t.Errorf("leader fallback: %s, %v", got.Name, err)
	}
	if _, err := (&Cluster{}).ReinitDonor("m1", ""); !errors.Is(err, ErrNoDonor) {
		t.Errorf("empty cluster: %v", err)
	}
}
