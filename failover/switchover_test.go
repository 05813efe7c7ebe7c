package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// TestDecideSwitchoverLag: the leader refuses a switchover whose target has
// not applied more than SwitchoverMaxBehind of its transactions, while it
// is still writable (RejectSwitchover is decided instead of Switchover, so
// nothing is fenced), and names the target, the distance, the limit and the
// fix. --allow-lag (Force) lets it wait for such a target.
func TestDecideSwitchoverLag(t *testing.T) {
	const u1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	leading := func() *snap {
		return cluster().me("db1").deadlineIn(3*time.Second).primary().gtid("db1", "0-1-5000").gtid("db2", "0-1-5000")
	}
	cases := []struct {
		name   string
		snap   *snap
		kind   Kind
		target string
		reason []string
	}{
		{"target further behind than the limit: refused before any fence",
			leading().gtid("db3", "0-1-3999").switchover("db1", "db3", 0), RejectSwitchover, "db3",
			[]string{"db3", "1001", "limit 1000", "wait until it catches up", "--allow-lag"}},
		{"target exactly at the limit: handed over",
			leading().gtid("db3", "0-1-4000").switchover("db1", "db3", 0), Switchover, "db3", []string{"requested"}},
		{"received but not applied counts as behind (a stopped SQL thread)",
			leading().gtid("db3", "0-1-100").with("db3", func(m *Member) { m.Retrieved = "0-1-5000" }).switchover("db1", "db3", 0),
			RejectSwitchover, "db3", []string{"4900"}},
		{"--allow-lag waits for a target however far behind",
			leading().gtid("db3", "0-1-100").switchover("db1", "db3", 0).force(), Switchover, "db3", []string{"requested"}},
		{"the best replica too far behind: refused, naming it",
			leading().gtid("db2", "0-1-3000").gtid("db3", "0-1-2000").switchover("db1", "", 0), RejectSwitchover, "db2",
			[]string{"db2", "2000"}},
		{"the best replica within the limit: handed over",
			leading().gtid("db3", "0-1-100").switchover("db1", "", 0), Switchover, "db2", []string{"best replica"}},
		{"a manual failover to a live leader's lagging replica: refused as well",
			leading().gtid("db3", "0-1-100").switchover("", "db3", 0), RejectSwitchover, "db3", []string{"4900"}},
		{"target's GTIDs unreadable: refused, nothing is known",
			leading().gtid("db3", "garbage").switchover("db1", "db3", 0), RejectSwitchover, "db3", []string{"cannot tell"}},
	}
	mysql := cluster().me("db1").deadlineIn(3*time.Second).primary().switchover("db1", "db3", 0)
	mysql.s.Flavor = gtid.MySQL
	mysql.gtid("db1", u1+":1-2500").gtid("db2", u1+":1-2500").gtid("db3", u1+":1-1000")
	cases = append(cases, struct {
		name   string
		snap   *snap
		kind   Kind
		target string
		reason []string
	}{"mysql: counted by GTID set difference", mysql, RejectSwitchover, "db3", []string{"1500"}})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.snap.s)
			if got.Kind != c.kind || got.Target != c.target {
				t.Fatalf("Decide = %+v (%s), want kind %s target %q", got, got.Kind, c.kind, c.target)
			}
			for _, want := range c.reason {
				if !strings.Contains(got.Reason, want) {
					t.Errorf("reason %q lacks %q", got.Reason, want)
				}
			}
		})
	}
}
