package e2e

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// The agents on the Kubernetes Lease DCS against a real kube-apiserver,
// with the Pods as API objects. Bootstrap writes the <cluster>-leader Lease
// (holderIdentity = the primary) and the role labels, which the Services'
// EndpointSlices follow. kill -9 of the primary's agent and mysqld: the
// Lease and the primary label move to the new primary; the dead primary's
// label is dropped by the new leader (its own agent is dead), before the new
// primary takes a write; the new leader records LeaderLost and Promoted
// Events on its pod. Back from the dead, the old primary is labelled replica.
func TestKubernetesFailover(t *testing.T) {
	c := NewCluster(t, Options{Kubernetes: true})
	k := c.Kube
	old := c.Bootstrap()
	survivors := c.Others(old)

	// Bootstrap: the Lease, the labels and the endpoints name the primary.
	k.WaitRouted(t, 30*time.Second, old.Name, names(survivors), nil)
	// The API serves nothing to a caller without the cluster's token.
	c.CheckAPIClosed(t)
	l, err := k.Lease()
	if err != nil || l == nil {
		t.Fatalf("reading Lease %s: %v", k.LeaseName(), err)
	}
	if l.Spec.LeaseDurationSeconds == nil || time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second != c.Timing.TTL ||
		l.Spec.RenewTime == nil || l.Spec.AcquireTime == nil {
		t.Errorf("Lease %s: leaseDurationSeconds %v, acquireTime %v, renewTime %v; want ttl %v and both times set",
			k.LeaseName(), l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime, c.Timing.TTL)
	}
	transitions := int32(0)
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions
	}
	for _, m := range c.Members {
		if _, cl, err := k.PodRole(m.Name); err != nil || cl != c.Name {
			t.Errorf("pod %s: cluster label %q (err %v), want %s", m.Name, cl, err, c.Name)
		}
	}
	k.waitEvent(t, 10*time.Second, old.Name, "Promoted", old.Name, time.Time{})

	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-failover")

	killed := time.Now()
	old.KillAgent()
	old.KillMySQL()
	// At the instant a survivor acknowledges its first write, the dead
	// primary's pod must be out of the primary Service already (labels are
	// dropped before the new primary unfences) and the Lease must name the writer.
	var (
		mu        sync.Mutex
		oldRole   string
		oldErr    error
		holderNow string
	)
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	win := FirstWriteThen(survivors, "k8s-failover", 20*time.Millisecond, limit, func(WriteWin) {
		role, _, err := k.PodRole(old.Name)
		holder, _ := k.LeaseHolder()
		mu.Lock()
		oldRole, oldErr, holderNow = role, err, holder
		mu.Unlock()
	})
	if win.Member == nil {
		t.Fatalf("no survivor accepted an application write within %v of killing %s\n%s%s", limit, old.Name, c.describe(), k.describe())
	}
	newPrimary := win.Member
	t.Logf("%s accepted the first write %v after %s's agent and mysqld were killed", newPrimary.Name,
		ms(win.At.Sub(killed)), old.Name)
	mu.Lock()
	if oldErr != nil || oldRole == "primary" {
		t.Errorf("when %s acknowledged its first write, the dead primary's pod %s still had role label %q (err %v)",
			newPrimary.Name, old.Name, oldRole, oldErr)
	}
	if holderNow != newPrimary.Name {
		t.Errorf("when %s acknowledged its first write, the Lease holder was %q", newPrimary.Name, holderNow)
	}
	mu.Unlock()
	if len(win.AlsoAccepted) > 0 {
		t.Errorf("%s accepted the first write, but %v accepted writes too", newPrimary.Name, win.AlsoAccepted)
	}
	c.WaitPrimary(30*time.Second, newPrimary, old)
	other := c.Others(old, newPrimary)[0]

	// The Lease moved, the labels and endpoints followed; the dead pod has
	// no role label, and only the new leader can have removed it.
	k.WaitRouted(t, 30*time.Second, newPrimary.Name, []string{other.Name}, []string{old.Name})
	if l, err := k.Lease(); err != nil || l == nil || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions <= transitions {
		t.Errorf("Lease %s: leaseTransitions did not grow from %d after the failover (%+v, err %v)", k.LeaseName(), transitions, l, err)
	}
	if !logHas(newPrimary.LogSince("starting agent"), "primary label removed", "pod", old.Name) {
		t.Errorf("%s's log does not record removing %s's primary label:\n%s", newPrimary.Name, old.Name, localproc.Tail(newPrimary.LogPath, 40))
	}
	lost := k.waitEvent(t, 10*time.Second, newPrimary.Name, "LeaderLost", newPrimary.Name, killed)
	if lost.Type != "Normal" || !strings.Contains(lost.Message, old.Name) {
		t.Errorf("LeaderLost Event on %s: type %s, message %q; want Normal, naming the lost leader %s", newPrimary.Name, lost.Type,
			lost.Message, old.Name)
	}
	k.waitEvent(t, 10*time.Second, newPrimary.Name, "Promoted", newPrimary.Name, killed)
	for _, reason := range []string{"LeaderLost", "Promoted"} {
		if evs, err := k.EventsSince(other.Name, reason, killed); err != nil || len(evs) > 0 {
			t.Errorf("%d %s Events on %s, which did not take over (err %v)", len(evs), reason, other.Name, err)
		}
		if evs, err := k.EventsSince(old.Name, reason, killed.Add(time.Second)); err != nil || len(evs) > 0 {
			t.Errorf("%d %s Events on the dead primary %s after the kill (err %v)", len(evs), reason, old.Name, err)
		}
	}
	// agentctl, on the Lease DCS, tells the operator the same.
	if cs := c.CtlStatus(); cs.Leader != newPrimary.Name {
		t.Errorf("agentctl status: leader %q, want %s", cs.Leader, newPrimary.Name)
	}
	if h := c.MustCtl("history"); !historyHas(h.Stdout, "failover", old.Name, newPrimary.Name) {
		t.Errorf("agentctl history lacks the failover %s -> %s:\n%s", old.Name, newPrimary.Name, h)
	}
	if !newPrimary.HasRow("before-failover") {
		t.Errorf("%s lacks the row acknowledged and replicated before the failover", newPrimary.Name)
	}
	c.WriteAndReplicate(newPrimary, "after-failover", old)
	sb.Stop()
	sb.ExpectAlive()

	// The old primary comes back: it follows, and its agent labels it
	// replica, which puts it back behind the replicas Service.
	old.RestartMySQL()
	old.StartAgent()
	c.WaitPrimary(30*time.Second, newPrimary)
	k.WaitRouted(t, 30*time.Second, newPrimary.Name, []string{old.Name, other.Name}, nil)
	c.WriteAndReplicate(newPrimary, "after-rejoin")
}

// logHas reports whether an agent log line has message msg and the string
// field key = value.
func logHas(lines []string, msg, key, value string) bool {
	for _, line := range lines {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["msg"] == msg && rec[key] == value {
			return true
		}
	}
	return false
}
