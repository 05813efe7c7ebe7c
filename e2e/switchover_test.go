package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// `agentctl switchover --to <replica> --force --wait` under a steady write
// load: the planned hand-over loses no acknowledged write, the old primary
// ends as a read-only replica of the new one, and never are two servers
// writable. On etcd.
func TestSwitchover(t *testing.T) {
	runSwitchover(t, Options{})
}

// The same on the Kubernetes Lease DCS; the pod role labels, the Lease and
// the Services' endpoints follow, and the agents record Events.
func TestSwitchoverKubernetes(t *testing.T) {
	runSwitchover(t, Options{Kubernetes: true})
}

func runSwitchover(t *testing.T, o Options) {
	c := NewCluster(t, o)
	old := c.Bootstrap()
	c.CreateLoadTable(old)
	target := c.Others(old)[0]
	other := c.Others(old, target)[0]
	if c.Kube != nil {
		c.Kube.WaitRouted(t, 30*time.Second, old.Name, names(c.Others(old)), nil)
	}
	sb := c.StartMonitor()
	w := c.StartWriter(1, func() []*Member { return []*Member{old, target} })
	// A load in full swing before the request.
	w.WaitAcks(t, 10*time.Second, old.Name, time.Time{}, 100)

	requested := time.Now()
	r := c.MustCtl("switchover", "--to", target.Name, "--force", "--wait")
	t.Logf("%s", r)
	for _, want := range []string{"Switchover requested: " + old.Name + " -> " + target.Name,
		target.Name + " is the primary and accepts writes"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("agentctl switchover --wait output lacks %q:\n%s", want, r)
		}
	}
	// --wait returns once the target accepts writes: the writer, following
	// GET /primary, soon confirms.
	w.WaitAcks(t, 10*time.Second, target.Name, requested, 100)
	w.Stop()
	acks := w.Acks()
	failed, lastErr := w.Failures()

	gap, err := GapBetween(acks, old.Name, target.Name)
	if err != nil {
		t.Fatalf("the writer did not see the hand-over from %s to %s: %v", old.Name, target.Name, err)
	}
	t.Logf("%d writes acknowledged (%d on %s, %d on %s), %d failed (last: %v); write unavailability %v "+
		"(last write on %s at %s, first on %s at %s); agentctl --wait returned after %v",
		len(acks), w.AcksOn(old.Name, time.Time{}), old.Name, w.AcksOn(target.Name, time.Time{}), target.Name, failed, lastErr,
		ms(gap.Duration()), old.Name, stamp(gap.LastOld.At), target.Name, stamp(gap.FirstNew.At), ms(r.Took()))
	if len(gap.Interleaved) > 0 {
		t.Errorf("%s acknowledged %d writes after %s acknowledged its first at %s (first: id %d at %s): two primaries took writes",
			old.Name, len(gap.Interleaved), target.Name, stamp(gap.FirstNew.At), gap.Interleaved[0].ID, stamp(gap.Interleaved[0].At))
	}
	if n := w.AcksOn(other.Name, time.Time{}); n > 0 {
		t.Errorf("%s, neither the old primary nor the target, acknowledged %d writes", other.Name, n)
	}

	if p := c.WaitHealthy(30 * time.Second); p != target {
		t.Fatalf("after the switchover the primary is %s, want %s", p.Name, target.Name)
	}
	// The old primary is a read-only replica of the new one, by its own
	// account and by the server's.
	st := old.Status()
	if st == nil || st.Role != "replica" || st.HoldsLock || st.Source != target.Server.Addr() || st.Replication != "running" {
		t.Errorf("%s: /status = %s, want a streaming replica of %s (%s) without the lock", old.Name, st, target.Name, target.Server.Addr())
	}
	if !old.MustReadOnly(t) {
		t.Errorf("%s: the old primary is writable after the switchover", old.Name)
	}
	// Zero acknowledged writes lost: the new primary has every one, and so
	// do the replicas, the old primary among them.
	finals := c.Finals(10*time.Second, acks, target, old, other)

	cs := c.CtlStatus()
	if cs.Leader != target.Name || cs.Switchover != nil || cs.Paused {
		t.Errorf("agentctl status: leader %q, pending switchover %v, paused %v; want leader %s, none pending, not paused",
			cs.Leader, cs.Switchover, cs.Paused, target.Name)
	}
	if role, state, _, _ := cs.member(old.Name); role != "replica" || state != "streaming" {
		t.Errorf("agentctl status: %s is %s/%s, want replica/streaming", old.Name, role, state)
	}
	h := c.MustCtl("history")
	if !historyHas(h.Stdout, "switchover", old.Name, target.Name) {
		t.Errorf("agentctl history lacks the switchover %s -> %s:\n%s", old.Name, target.Name, h)
	}

	if c.Kube != nil {
		// Labels, Lease and endpoints follow; the agents say what they did.
		c.Kube.WaitRouted(t, 30*time.Second, target.Name, []string{old.Name, other.Name}, nil)
		c.Kube.waitEvent(t, 10*time.Second, old.Name, "Switchover", old.Name, requested)
		c.Kube.waitEvent(t, 10*time.Second, target.Name, "Promoted", target.Name, requested)
		l, err := c.Kube.Lease()
		if err != nil || l == nil || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions < 1 {
			t.Errorf("Lease %s: %+v (err %v), want leaseTransitions >= 1 after a hand-over", c.Kube.LeaseName(), l, err)
		}
	}
	sb.Judge(acks, finals, checker.Expect{})
	sb.ExpectAlive()
}

// checkHistoryJSON checks that `agentctl history -o json` lists the entry
// from -> to, of kind kind, in a form a script can read: the kind by name.
func checkHistoryJSON(t *testing.T, r CtlResult, kind, from, to string) {
	t.Helper()
	var entries []map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &entries); err != nil {
		t.Errorf("agentctl history -o json is not a JSON list: %v\n%s", err, r)
		return
	}
	// Either spelling of the keys: the JSON form is not specified beyond
	// carrying the table's columns.
	field := func(e map[string]any, key string) any {
		if v, ok := e[key]; ok {
			return v
		}
		return e[strings.ToUpper(key[:1])+key[1:]]
	}
	for _, e := range entries {
		if field(e, "from") != from || field(e, "to") != to {
			continue
		}
		if k := field(e, "kind"); k != kind {
			knownBug(t, "KB-CTL4", "agentctl history -o json gives the kind of the %s -> %s %s as %v (%T), want %q:\n%s",
				from, to, kind, k, k, kind, r)
		}
		return
	}
	t.Errorf("agentctl history -o json lacks the %s %s -> %s:\n%s", kind, from, to, r)
}

// historyHas reports whether `agentctl history` (table) lists an entry of
// kind from -> to.
func historyHas(table, kind, from, to string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == kind && f[2] == from && f[3] == to {
			return true
		}
	}
	return false
}
