package failover

import (
	"reflect"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestFromRecord(t *testing.T) {
	lag := 3 * time.Second
	healthy := dcs.Member{
		Name: "db2", MySQLAddr: "10.0.0.2:3306", Role: dcs.RoleReplica, GTIDExecuted: "0-1-100", GTIDRetrieved: "0-1-105",
		Replication: dcs.ReplicationRunning, Lag: &lag, FailoverPriority: 2,
	}
	with := func(f func(*dcs.Member)) dcs.Member {
		m := healthy
		f(&m)
		return m
	}
	want := Member{Name: "db2", Addr: "10.0.0.2:3306", Fresh: true, Healthy: true, Priority: 2, Executed: "0-1-100", Retrieved: "0-1-105", Lag: &lag}
	wantWith := func(f func(*Member)) Member {
		m := want
		f(&m)
		return m
	}
	for _, tc := range []struct {
		name string
		in   dcs.Member
		want Member
	}{
		{"healthy replica", healthy, want},
		{"primary", with(func(m *dcs.Member) { m.Role = dcs.RolePrimary }), wantWith(func(m *Member) { m.Primary = true })},
		{"async tag", with(func(m *dcs.Member) { m.Tags = map[string]string{TagAsync: "streams without acknowledging"} }),
			wantWith(func(m *Member) { m.Async = true })},
		{"stale record", with(func(m *dcs.Member) { m.Stale = true }), wantWith(func(m *Member) { m.Fresh, m.RecordStale = false, true })},
		{"acknowledgers listed", with(func(m *dcs.Member) { m.Tags = map[string]string{TagAcknowledgers: "db2,db3"} }),
			wantWith(func(m *Member) { m.Acknowledgers, m.AcknowledgersKnown = []string{"db2", "db3"}, true })},
		{"no acknowledgers listed", with(func(m *dcs.Member) { m.Tags = map[string]string{TagAcknowledgers: ""} }),
			wantWith(func(m *Member) { m.Acknowledgers, m.AcknowledgersKnown = []string{}, true })},
		{"role unknown", with(func(m *dcs.Member) { m.Role = dcs.RoleUnknown }), wantWith(func(m *Member) { m.Healthy = false })},
		{"nofailover", with(func(m *dcs.Member) { m.NoFailover = true }), wantWith(func(m *Member) { m.NoFailover = true })},
		{"broken replication", with(func(m *dcs.Member) { m.Replication = dcs.ReplicationBroken }),
			wantWith(func(m *Member) { m.ReplicationBroken = true })},
		{"errant tag", with(func(m *dcs.Member) { m.Tags = map[string]string{TagErrant: "0-3-5"} }),
			wantWith(func(m *Member) { m.Errant, m.ErrantGTIDs = true, "0-3-5" })},
		{"empty errant tag", with(func(m *dcs.Member) { m.Tags = map[string]string{TagErrant: ""} }), want},
		{"rebuilding tag", with(func(m *dcs.Member) { m.Tags = map[string]string{TagRebuilding: "from db3"} }),
			wantWith(func(m *Member) { m.Rebuilding = true })},
		{"restarting tag", with(func(m *dcs.Member) { m.Tags = map[string]string{TagRestarting: "since 10:00:00"} }),
			wantWith(func(m *Member) { m.Restarting = true })},
		{"lagging tag alone changes nothing", with(func(m *dcs.Member) { m.Tags = map[string]string{TagLagging: "over 30s"} }), want},
	} {
		if got := FromRecord(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: FromRecord = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
