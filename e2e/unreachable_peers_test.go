package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// Two of three members unreachable at the network level: the primary's node
// dies (kill -9 of its agent and mysqld, and its address goes silent) and
// another member's mysqld is cut off (its agent and mysqld keep running and
// reach the DCS). Every member's mysqld sits behind a Proxy, whose address
// its agent advertises; a black-holed proxy accepts connections and never
// answers, so dials to the two members time out instead of being refused.
// The survivor must still promote, within one bound on the peers it cannot
// reach rather than one per peer: writable and taking writes within
// ttl + 3 s of the failure, and steadily for 2 x ttl more while its peers
// stay silent; never two writable servers; nothing acknowledged lost.
// Healed, the cut-off member and the restarted old primary follow the
// survivor.
func TestUnreachablePeers(t *testing.T) {
	runUnreachablePeers(t, "unreachable_peers", Options{MySQLProxies: true})
}

// TestUnreachablePeersKubernetes is TestUnreachablePeers on the Kubernetes
// Lease DCS.
func TestUnreachablePeersKubernetes(t *testing.T) {
	runUnreachablePeers(t, "unreachable_peers_kubernetes", Options{MySQLProxies: true, Kubernetes: true})
}

func runUnreachablePeers(t *testing.T, scenario string, o Options) {
	c := NewCluster(t, o)
	rep := NewInjections(t, scenario)
	old := c.Bootstrap()
	c.CreateLoadTable(old)
	// The survivor is the member the tie-break favours (the lower name):
	// with equal data the cut-off member, whose agent still reaches the
	// DCS, defers to it, so the promotion under test is the one that cannot
	// reach either peer.
	others := c.Others(old)
	survivor, cut := others[0], others[1]
	sb := c.StartMonitor()
	rep.Watch(sb)

	// With two of three members gone, an acknowledged write may exist on
	// the cut-off member alone, which the survivor cannot see; no
	// replication mode promises it survives. The load is therefore stopped
	// before the failure and every write it got acknowledged is on both
	// replicas; the unavailability is measured from the failure to the first
	// write a new writer gets acknowledged.
	before := c.StartWriter(1, nil)
	before.WaitAcks(t, 10*time.Second, old.Name, time.Time{}, 50)
	before.Stop()
	c.JudgeWrites("the load before the failure", before.Acks(), c.Finals(10*time.Second, before.Acks(), old, others...))

	rep.Trial()
	old.Proxy.BlackHole()
	cut.Proxy.BlackHole()
	failed := time.Now()
	old.KillAgent()
	old.KillMySQL()
	old.mark("proxy black-holed with the kill")
	cut.mark("proxy black-holed")
	after := c.StartWriter(before.NextID(), func() []*Member { return others })
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	var first Ack
	waitFor(t, limit, "a survivor to acknowledge a write after the failure", func() (bool, string) {
		if acks := after.Acks(); len(acks) > 0 {
			first = acks[0]
			return true, ""
		}
		fails, last := after.Failures()
		return false, fmt.Sprintf("%d failed writes (last: %v)\n%s", fails, last, c.describe())
	})
	outage := first.At.Sub(failed)
	rep.Outage(outage)
	bound := c.Timing.TTL + 3*time.Second
	t.Logf("%s acknowledged the first write %v after %s died and %s was cut off (bound ttl + 3 s = %v)",
		first.Member, ms(outage), old.Name, cut.Name, bound)
	if first.Member != survivor.Name {
		t.Fatalf("%s, which is cut off, took the first write; want %s, the member that reaches every other\n%s", first.Member, survivor.Name, c.describe())
	}
	if outage > bound {
		t.Errorf("%s became writable %v after the failure, beyond the bound of %v", survivor.Name, ms(outage), bound)
	}
	if h, err := c.LeaderHolder(); err != nil || h != survivor.Name {
		t.Errorf("the leader lock names %q (err %v), want %s", h, err, survivor.Name)
	}
	// The writer may have found the survivor writable by trying it
	// directly, a moment before its agent published the promotion.
	waitFor(t, 3*time.Second, survivor.Name+"'s GET /primary to answer 200", func() (bool, string) {
		return survivor.IsPrimaryAPI(), survivor.Status().String()
	})
	// The new leader probes its silent peers at every iteration; that must
	// not cost it its lock: it keeps taking writes while they stay silent.
	steadyFrom := time.Now()
	time.Sleep(2 * c.Timing.TTL)
	expectSteadyWrites(t, after, survivor, steadyFrom, time.Now(), "while its two peers were unreachable")
	if h, err := c.LeaderHolder(); err != nil || h != survivor.Name {
		t.Errorf("after 2 x ttl with its peers unreachable, the leader lock names %q (err %v), want %s", h, err, survivor.Name)
	}
	if !cut.MustReadOnly(t) {
		t.Errorf("the cut-off member %s is writable", cut.Name)
	}

	// Heal: the cut-off member's proxy forwards again; the old primary's
	// node comes back (mysqld, then its address, then its agent).
	cut.Proxy.Heal()
	cut.mark("proxy healed")
	old.RestartMySQL()
	old.Proxy.Heal()
	old.mark("proxy healed")
	old.StartAgent()
	c.WaitRejoined(30*time.Second, old, survivor)
	if st := cut.Status(); st == nil || st.Errant != "" || st.Role != "replica" {
		t.Errorf("%s after the heal: /status %s, want a replica without errant transactions", cut.Name, st)
	}
	after.WaitAcks(t, 10*time.Second, survivor.Name, time.Now(), 20)
	after.Stop()

	acks := append(before.Acks(), after.Acks()...)
	finals := c.Finals(30*time.Second, acks, survivor, c.Others(survivor)...)
	c.ExpectSameGTIDs(survivor, "unreachable-peers-end")
	rep.AckedLost(len(sb.Judge(acks, finals, checker.Expect{}).Lost))
	sb.ExpectAlive()
}
