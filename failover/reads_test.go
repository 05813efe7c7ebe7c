package failover

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestReadRefusal(t *testing.T) {
	lag := func(d time.Duration) *time.Duration { return &d }
	streaming := func(l *time.Duration) ReadState {
		return ReadState{Role: dcs.RoleReplica, Healthy: true, Replication: dcs.ReplicationRunning, Lag: l, Limit: 30 * time.Second}
	}
	with := func(s ReadState, f func(*ReadState)) ReadState { f(&s); return s }
	stopped := func(s *ReadState) { s.Replication = dcs.ReplicationStopped }
	for _, c := range []struct {
		name string
		in   ReadState
		want string
	}{
		{"streaming, caught up", streaming(lag(0)), ""},
		{"streaming, at the limit", streaming(lag(30 * time.Second)), ""},
		{"streaming, past the limit", streaming(lag(31 * time.Second)), "lag 31s over maximum_lag_for_reads 30s"},
		{"just past the limit", streaming(lag(30*time.Second + 420*time.Millisecond)), "lag 30.4s over maximum_lag_for_reads 30s"},
		{"lag unknown", streaming(nil), "lag unknown"},
		{"the primary", with(streaming(lag(0)), func(s *ReadState) { s.Role = dcs.RolePrimary }), "not a replica"},
		{"no role", with(streaming(lag(0)), func(s *ReadState) { s.Role = dcs.RoleUnknown }), "not a replica"},
		{"mysqld down", with(streaming(lag(0)), func(s *ReadState) { s.Healthy, s.Replication = false, dcs.ReplicationUnknown }),
			"mysqld does not answer"},
		{"receiver down, received within the limit", with(streaming(lag(5*time.Second)), stopped), ""},
		{"receiver down, nothing received for longer than the limit", with(streaming(lag(45*time.Second)), stopped),
			"lag 45s over maximum_lag_for_reads 30s"},
		{"broken", with(streaming(lag(0)), func(s *ReadState) { s.Replication = dcs.ReplicationBroken }), "replication broken"},
		{"no limit, far behind", with(streaming(lag(time.Hour)), func(s *ReadState) { s.Limit = 0 }), ""},
		{"no limit, receiver down", with(streaming(lag(time.Hour)), func(s *ReadState) { s.Limit = 0; stopped(s) }), ""},
		{"no limit, lag unknown", with(streaming(nil), func(s *ReadState) { s.Limit = 0 }), ""},
		{"no limit, broken", with(streaming(lag(0)), func(s *ReadState) { s.Limit, s.Replication = 0, dcs.ReplicationBroken }), "replication broken"},
		{"no limit, mysqld down", with(streaming(lag(0)), func(s *ReadState) { s.Limit, s.Healthy = 0, false }), "mysqld does not answer"},
		{"no limit, the primary", with(streaming(nil), func(s *ReadState) { s.Limit, s.Role = 0, dcs.RolePrimary }), "not a replica"},
	} {
		if got := ReadRefusal(c.in); got != c.want {
			t.Errorf("%s: ReadRefusal(%+v) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}
