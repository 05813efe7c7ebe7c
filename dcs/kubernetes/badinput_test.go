package kubernetes_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/dcstest"
	k8sdcs "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ourLabels(cluster string) map[string]string {
	return map[string]string{k8sdcs.DefaultManagedByLabel: k8sdcs.ManagedByValue, k8sdcs.DefaultClusterLabel: cluster}
}

// putLease creates or replaces a Lease with the admin client.
func putLease(t *testing.T, cs kubernetes.Interface, l *coordinationv1.Lease) {
	t.Helper()
	leases := cs.CoordinationV1().Leases(l.Namespace)
	cur, err := leases.Get(ctx5(t), l.Name, metav1.GetOptions{})
	if err == nil {
		l.ResourceVersion = cur.ResourceVersion
		_, err = leases.Update(ctx5(t), l, metav1.UpdateOptions{})
	} else {
		_, err = leases.Create(ctx5(t), l, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("writing Lease %s: %v", l.Name, err)
	}
}

func waitCluster(t *testing.T, s dcs.Store, what string, cond func(*dcs.Cluster) bool) *dcs.Cluster {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := s.Cluster(ctx5(t))
		if err == nil && cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s (err %v, cluster %+v)", what, err, c)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasProblem(c *dcs.Cluster, substr string) bool {
	for _, p := range c.Problems {
		if errors.Is(p, dcs.ErrCorrupt) && strings.Contains(p.Error(), substr) {
			return true
		}
	}
	return false
}

// testGarbageLeader writes leader Leases the API server accepts but the
// contract must not (zero or negative durations and transitions are
// rejected by the API server's validation; parse_test.go covers them).
func testGarbageLeader(t *testing.T, api *kubetest.APIServer, ns string) {
	cs := api.Client(t)
	for _, tc := range []struct {
		name string
		spec coordinationv1.LeaseSpec
		want string
	}{
		{"absurd duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](2147483647)}, "impossible leaseDurationSeconds 2147483647"},
		{"missing duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0")}, "leaseDurationSeconds is missing"},
		{"bad holder", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("M0 with spaces"), LeaseDurationSeconds: ptr.To[int32](5)}, "holder name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := newCluster()
			clk := fakeClock()
			// m0 is the store whose name the garbage record carries.
			a := newStore(t, api.Config(), ns, cluster, "m0", clk)
			putLease(t, cs, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: cluster + "-leader", Namespace: ns, Labels: ourLabels(cluster)},
				Spec:       tc.spec,
			})
			c := waitCluster(t, a, "the corrupt lock is seen", func(c *dcs.Cluster) bool { return c.Leader != nil })
			l := c.Leader
			if l.Holder != dcs.UnknownHolder || !errors.Is(l.Err, dcs.ErrCorrupt) || !strings.Contains(l.Err.Error(), "Lease "+ns+"/"+cluster+"-leader") ||
				!strings.Contains(l.Err.Error(), tc.want) || l.TTL != dcs.DefaultTTL || l.Expired {
				t.Fatalf("corrupt lock read as %+v, want held by %s, an error naming the Lease and %q, the config ttl", l, dcs.UnknownHolder, tc.want)
			}
			if !hasProblem(c, tc.want) {
				t.Fatalf("Problems do not report the corrupt lock: %v", c.Problems)
			}
			// Never "held by me", even though the garbage names m0.
			if err := a.RenewLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrNotLeader) {
				t.Fatalf("renew of a corrupt lock naming me: %v, want ErrNotLeader", err)
			}
			if err := a.HandoverLeader(ctx5(t), "m1", "0123456789abcdef"); !errors.Is(err, dcs.ErrNotLeader) {
				t.Fatalf("hand-over of a corrupt lock: %v, want ErrNotLeader", err)
			}
			// Never free before the ttl rule: held until unchanged for ttl.
			clk.Step(dcs.DefaultTTL - time.Millisecond)
			err := a.AcquireLeader(ctx5(t), ttl)
			if !errors.Is(err, dcs.ErrHeld) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("acquire before ttl: %v, want ErrHeld explaining %q", err, tc.want)
			}
			clk.Step(time.Millisecond)
			if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
				t.Fatalf("acquire after the corrupt lock stayed unchanged for ttl: %v", err)
			}
			c = waitCluster(t, a, "m0 holds a valid lock", func(c *dcs.Cluster) bool { return c.Leader != nil && c.Leader.Holder == "m0" })
			if c.Leader.Err != nil || len(c.Problems) != 0 {
				t.Fatalf("after takeover: %+v, problems %v", c.Leader, c.Problems)
			}
		})
	}
}

// testLeaderEditedByHand: the holder's instance annotation names the
// holder it was written for. After someone else (kubectl edit, an older
// agent) sets holderIdentity to another member without rewriting it, the
// lock reads as held by that member with no instance: nobody's store may
// renew or adopt it, and it is taken over only once it expires.
func testLeaderEditedByHand(t *testing.T, api *kubetest.APIServer, ns string) {
	cs := api.Client(t)
	cluster := newCluster()
	aclk, bclk := fakeClock(), fakeClock()
	a := newStore(t, api.Config(), ns, cluster, "m0", aclk)
	b := newStore(t, api.Config(), ns, cluster, "m1", bclk)
	if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases(ns)
	l, err := leases.Get(ctx5(t), cluster+"-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Annotations[k8sdcs.HolderInstanceAnnotation], "m0/"+a.Instance(); got != want || ptr.Deref(l.Spec.HolderIdentity, "") != "m0" {
		t.Fatalf("leader Lease holderIdentity %q, annotation %q; want m0 and %q", ptr.Deref(l.Spec.HolderIdentity, ""), got, want)
	}
	l.Spec.HolderIdentity = ptr.To("m1") // the annotation still says m0/<a's instance>
	if _, err := leases.Update(ctx5(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []dcs.Store{a, b} {
		c := waitCluster(t, s, "m1 holds", func(c *dcs.Cluster) bool { return c.Leader != nil && c.Leader.Holder == "m1" })
		if c.Leader.Instance != "" || c.Leader.Err != nil {
			t.Fatalf("%s reads the edited lock as %+v, want m1 with instance \"\" and no error", s.Member(), c.Leader)
		}
	}
	if err := b.RenewLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrNotLeader) {
		t.Fatalf("m1 renews a lock naming it without its instance: %v, want ErrNotLeader", err)
	}
	if err := a.RenewLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrNotLeader) {
		t.Fatalf("m0 renews after holderIdentity was changed: %v, want ErrNotLeader", err)
	}
	err = b.AcquireLeader(ctx5(t), ttl)
	if !errors.Is(err, dcs.ErrHeld) || !strings.Contains(err.Error(), "no agent instance id") {
		t.Fatalf("m1 acquires a lock naming it without an instance: %v, want ErrHeld saying so", err)
	}
	bclk.Step(ttl)
	if err := b.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatalf("m1 takes over once the lock expired: %v", err)
	}
	c := waitCluster(t, a, "m1's instance holds", func(c *dcs.Cluster) bool {
		return c.Leader != nil && c.Leader.Holder == "m1" && c.Leader.Instance == b.Instance()
	})
	if len(c.Problems) != 0 {
		t.Fatalf("problems: %v", c.Problems)
	}
	if err := b.RenewLeader(ctx5(t), ttl); err != nil {
		t.Fatalf("m1 renews its own lock: %v", err)
	}
}

// testUnlabeledLeader: a Lease with the leader's name that this cluster's
// agents did not make is never touched; the error says what to do.
func testUnlabeledLeader(t *testing.T, api *kubetest.APIServer, ns string) {
	cluster := newCluster()
	putLease(t, api.Client(t), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-leader", Namespace: ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone"), LeaseDurationSeconds: ptr.To[int32](15)},
	})
	a := newStore(t, api.Config(), ns, cluster, "m0", fakeClock())
	err := a.AcquireLeader(ctx5(t), ttl)
	if !errors.Is(err, dcs.ErrCorrupt) || !strings.Contains(err.Error(), "without label") || !strings.Contains(err.Error(), "delete or relabel") {
		t.Fatalf("acquire over a foreign Lease: %v, want ErrCorrupt naming the missing label and the fix", err)
	}
	if err := a.RenewLeader(ctx5(t), ttl); err == nil {
		t.Fatal("renew over a foreign Lease succeeded")
	}
}

func testGarbageRecords(t *testing.T, api *kubetest.APIServer, ns string) {
	cs := api.Client(t)
	cluster := newCluster()
	a := newStore(t, api.Config(), ns, cluster, "m0", fakeClock())
	putLease(t, cs, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-member-m1", Namespace: ns, Labels: ourLabels(cluster),
			Annotations: map[string]string{k8sdcs.MemberAnnotation: `{"name":"m1","role":`}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m1"), LeaseDurationSeconds: ptr.To[int32](30)},
	})
	putLease(t, cs, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-member-m2", Namespace: ns, Labels: ourLabels(cluster),
			Annotations: map[string]string{k8sdcs.MemberAnnotation: `{"name":"m2","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m9"), LeaseDurationSeconds: ptr.To[int32](30)},
	})
	putLease(t, cs, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-member-m3", Namespace: ns, Labels: ourLabels(cluster),
			Annotations: map[string]string{k8sdcs.MemberAnnotation: `{"name":"m3","role":"emperor","replication":"running","updated_at":"2025-01-01T00:00:00Z","lag":"-3s"}`}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m3"), LeaseDurationSeconds: ptr.To[int32](30)},
	})
	putLease(t, cs, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-state", Namespace: ns, Labels: ourLabels(cluster),
			Annotations: map[string]string{
				k8sdcs.ConfigAnnotation:      `{"ttl":"5s","loop_wait":"10s"}`,
				k8sdcs.SwitchoverAnnotation:  `not json`,
				k8sdcs.RestartAnnotation:     `{"member":"m1"}`,
				k8sdcs.InitializedAnnotation: `{"cluster_id":""}`,
				// Not a kind's name at all: a newer version's kind ("coup") would be kept.
				k8sdcs.HistoryAnnotation: `[{"kind":"coup!","to":"m1","at":"2025-01-01T00:00:00Z"}]`,
			}},
	})
	c := waitCluster(t, a, "all garbage seen", func(c *dcs.Cluster) bool { return len(c.Problems) == 8 })
	for _, want := range []string{
		"annotation mysqlha.io/restart: invalid restart request: dcs: invalid argument: restart requested_at is missing",
		"Lease " + ns + "/" + cluster + "-member-m1 annotation mysqlha.io/member: member record is not valid JSON",
		`holderIdentity "m9" does not match the member name "m2"`,
		`unknown role "emperor"`,
		"loop_wait + 2*retry_timeout <= ttl - safety_margin",
		"annotation mysqlha.io/switchover: switchover request is not valid JSON",
		"initialized cluster_id is empty",
		`unknown history kind "coup!"`,
	} {
		if !hasProblem(c, want) {
			t.Errorf("no problem reported containing %q; problems: %v", want, c.Problems)
		}
	}
	if len(c.Members) != 0 || c.Config != dcs.DefaultConfig() || c.ConfigVersion == "" || c.History != nil {
		t.Fatalf("garbage leaked into the snapshot: members %+v, config %+v (version %q), history %+v", c.Members, c.Config, c.ConfigVersion, c.History)
	}
	if c.Switchover == nil || !errors.Is(c.Switchover.Err, dcs.ErrCorrupt) || c.Initialized == nil || !errors.Is(c.Initialized.Err, dcs.ErrCorrupt) {
		t.Fatalf("unreadable switchover/initialized must be present with Err: %+v %+v", c.Switchover, c.Initialized)
	}
	if !errors.Is(c.ConfigErr, dcs.ErrCorrupt) {
		t.Fatalf("ConfigErr %v, want the unreadable config flagged (a reader must not act on the defaults)", c.ConfigErr)
	}
	if c.Restart == nil || !errors.Is(c.Restart.Err, dcs.ErrCorrupt) || c.RestartPending("m1") {
		t.Fatalf("an unreadable restart request must be present with Err, and not pending for its member: %+v", c.Restart)
	}
	// Every unreadable record can be repaired through the contract.
	if err := a.ClearRestart(ctx5(t), c.Restart.Version); err != nil {
		t.Fatalf("clearing a corrupt restart request: %v", err)
	}
	if err := a.SetConfig(ctx5(t), dcs.DefaultConfig(), c.ConfigVersion); err != nil {
		t.Fatalf("overwriting a corrupt config: %v", err)
	}
	if err := a.ClearSwitchover(ctx5(t), c.Switchover.Version); err != nil {
		t.Fatalf("clearing a corrupt switchover: %v", err)
	}
	if err := a.SetInitialized(ctx5(t), dcs.Initialized{ClusterID: "x"}); !errors.Is(err, dcs.ErrExists) {
		t.Fatalf("an unreadable initialized record must still count as initialized: %v", err)
	}
	if err := a.AppendHistory(ctx5(t), dcs.HistoryEntry{Kind: dcs.HistoryFailover, To: "m0", At: time.Now()}); err != nil {
		t.Fatalf("appending to a corrupt history: %v", err)
	}
	waitCluster(t, a, "repaired", func(c *dcs.Cluster) bool {
		return len(c.Problems) == 4 && len(c.History) == 1 && c.Switchover == nil && c.Restart == nil
	})
}

// testForbidden: the unprivileged user gets ErrForbidden naming the refused
// verb and resource and the fix; a user allowed to read but not write gets
// it on the write.
func testForbidden(t *testing.T, api *kubetest.APIServer) {
	const ns = "forbidden"
	api.CreateNamespace(t, ns)
	cluster := newCluster()
	s := newStore(t, api.UnprivilegedConfig(), ns, cluster, "m0", fakeClock())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := s.Cluster(ctx)
	if !errors.Is(err, dcs.ErrForbidden) || !strings.Contains(err.Error(), `cannot list resource "leases"`) || !strings.Contains(err.Error(), "RBACRules") {
		t.Fatalf("Cluster as an unprivileged user: %v, want ErrForbidden naming list leases and the fix", err)
	}
	if err := s.AcquireLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrForbidden) {
		t.Fatalf("AcquireLeader as an unprivileged user: %v, want ErrForbidden", err)
	}

	// Read-only: the write is refused, never reported as success.
	bindRules(t, api, ns, "readonly", []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}}})
	ro := newStore(t, api.UnprivilegedConfig(), ns, newCluster(), "m0", fakeClock())
	waitCluster(t, ro, "listed", func(*dcs.Cluster) bool { return true })
	err = ro.AcquireLeader(ctx5(t), ttl)
	if !errors.Is(err, dcs.ErrForbidden) || !strings.Contains(err.Error(), `cannot create resource "leases"`) {
		t.Fatalf("AcquireLeader without create: %v, want ErrForbidden naming create leases", err)
	}
	if err := ro.UpdateMember(ctx5(t), dcs.Member{}); !errors.Is(err, dcs.ErrForbidden) {
		t.Fatalf("UpdateMember without create: %v", err)
	}
}

// bindRules binds rules to kubetest.UnprivilegedUser in ns.
func bindRules(t *testing.T, api *kubetest.APIServer, ns, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	cs := api.Client(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx5(t), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubetest.UnprivilegedUser}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx5(t), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC changes reach the authorizer through its informer: wait.
	deadline := time.Now().Add(10 * time.Second)
	leases := clientset(t, api.UnprivilegedConfig()).CoordinationV1().Leases(ns)
	for {
		if _, err := leases.List(ctx5(t), metav1.ListOptions{Limit: 1}); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the RoleBinding did not take effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testMinimalRole runs the whole contract suite as a user holding exactly
// RBACRules in one namespace: the Role suffices.
func testMinimalRole(t *testing.T, api *kubetest.APIServer) {
	const ns = "minimal-rbac"
	api.CreateNamespace(t, ns)
	bindRules(t, api, ns, "mysqlha-agent", k8sdcs.RBACRules())
	// agentctl remove runs with an operator's credentials.
	dcstest.Run(t, factoryAs(api.UnprivilegedConfig(), api.Config(), ns))
	t.Run("RemoveNeedsDelete", func(t *testing.T) { testRemoveNeedsDelete(t, api, ns) })
}

// testRemoveNeedsDelete: the agents' Role grants no delete, so a store with
// it cannot remove a member, and says what is missing.
func testRemoveNeedsDelete(t *testing.T, api *kubetest.APIServer, ns string) {
	cluster := newCluster()
	clk := fakeClock()
	gone := newStore(t, api.UnprivilegedConfig(), ns, cluster, "m0", fakeClock())
	s := newStore(t, api.UnprivilegedConfig(), ns, cluster, "m1", clk)
	if err := gone.UpdateMember(ctx5(t), dcs.Member{Role: dcs.RoleReplica}); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, s, "m0's record", func(c *dcs.Cluster) bool { return len(c.Members) == 1 })
	clk.Step(memberTTL)
	err := s.DeleteMember(ctx5(t), "m0")
	if !errors.Is(err, dcs.ErrForbidden) || !strings.Contains(err.Error(), "needs the delete verb on leases in namespace "+ns) {
		t.Fatalf("delete with the agents' Role: %v, want ErrForbidden naming the delete verb", err)
	}
}

// delayingTransport delays every request by delay while enabled.
type delayingTransport struct {
	next    http.RoundTripper
	enabled *atomic.Bool
	delay   time.Duration
}

func (d delayingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if d.enabled.Load() {
		select {
		case <-time.After(d.delay):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return d.next.RoundTrip(r)
}

// testSlowAPIServer: an API server slower than retry_timeout yields
// ErrUnreachable within the caller's deadline, and never false leadership.
func testSlowAPIServer(t *testing.T, api *kubetest.APIServer, ns string) {
	const retryTimeout = 300 * time.Millisecond
	var slow atomic.Bool
	cfg := api.Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return delayingTransport{next: rt, enabled: &slow, delay: 2 * retryTimeout}
	}
	cluster := newCluster()
	a := newStore(t, cfg, ns, cluster, "m0", fakeClock())
	bclk := fakeClock()
	b := newStore(t, api.Config(), ns, cluster, "m1", bclk)
	if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	call := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), retryTimeout)
		t.Cleanup(cancel)
		return ctx
	}
	slow.Store(true)
	start := time.Now()
	err := a.RenewLeader(call(), ttl)
	if !errors.Is(err, dcs.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("renew against a slow API server: %v, want ErrUnreachable wrapping the deadline", err)
	}
	if d := time.Since(start); d > 2*retryTimeout {
		t.Fatalf("renew took %v, beyond its %v deadline", d, retryTimeout)
	}
	if err := a.UpdateMember(call(), dcs.Member{}); !errors.Is(err, dcs.ErrUnreachable) {
		t.Fatalf("member update against a slow API server: %v", err)
	}
	// a cannot renew; b takes over after ttl on its clock.
	waitCluster(t, b, "b sees m0", func(c *dcs.Cluster) bool { return c.Leader != nil && c.Leader.Holder == "m0" })
	bclk.Step(ttl)
	if err := b.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatalf("b takes over from a holder that cannot renew: %v", err)
	}
	// a's slow calls never succeed in claiming the lock back.
	for i := 0; i < 3; i++ {
		err := a.AcquireLeader(call(), ttl)
		if err == nil {
			t.Fatal("a slow store claimed the lock held by b")
		}
		if err := a.RenewLeader(call(), ttl); err == nil {
			t.Fatal("a slow stale holder renewed")
		}
	}
	slow.Store(false)
	if err := a.RenewLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrNotLeader) {
		t.Fatalf("stale holder renews once the API server is fast again: %v, want ErrNotLeader", err)
	}
}

// testAPIServerDies: a store whose API server disappears keeps its
// last snapshot but every write fails with ErrUnreachable.
func testAPIServerDies(t *testing.T) {
	api := kubetest.Start(t)
	api.CreateNamespace(t, "dies")
	cluster := newCluster()
	a := newStore(t, api.Config(), "dies", cluster, "m0", fakeClock())
	if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	api.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := a.RenewLeader(ctx, ttl); !errors.Is(err, dcs.ErrUnreachable) {
		t.Fatalf("renew with the API server dead: %v, want ErrUnreachable", err)
	}
	c, err := a.Cluster(ctx5(t))
	if err != nil || c.Leader == nil || c.Leader.Holder != "m0" {
		t.Fatalf("snapshot after the API server died: %+v, %v", c, err)
	}
}

// badInput runs the bad-input cases against api.
func badInput(t *testing.T, api *kubetest.APIServer) {
	const ns = "bad"
	api.CreateNamespace(t, ns)
	t.Run("GarbageLeaderLease", func(t *testing.T) { testGarbageLeader(t, api, ns) })
	t.Run("UnlabeledLeaderLease", func(t *testing.T) { testUnlabeledLeader(t, api, ns) })
	t.Run("LeaderEditedByHand", func(t *testing.T) { testLeaderEditedByHand(t, api, ns) })
	t.Run("GarbageRecords", func(t *testing.T) { testGarbageRecords(t, api, ns) })
	t.Run("Forbidden", func(t *testing.T) { testForbidden(t, api) })
	t.Run("MinimalRoleSuffices", func(t *testing.T) { testMinimalRole(t, api) })
	t.Run("SlowAPIServer", func(t *testing.T) { testSlowAPIServer(t, api, ns) })
	t.Run("StalledWatch", func(t *testing.T) { testStalledWatch(t, api, ns) })
}

// stallingTransport holds back what the API server streams on watches
// while stalled: the store's cache stops following the server, as it did
// on the test node under 500 ms of packet delay, while its reads and
// writes still get through.
type stallingTransport struct {
	next    http.RoundTripper
	stalled *atomic.Bool
}

func (s stallingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if err == nil && r.URL.Query().Get("watch") == "true" {
		resp.Body = stallingBody{resp.Body, s.stalled}
	}
	return resp, err
}

type stallingBody struct {
	io.ReadCloser
	stalled *atomic.Bool
}

func (b stallingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for b.stalled.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	return n, err
}

// testStalledWatch: a store whose watch lags tries to take a lock that
// another member took meanwhile. The write conflicts, and that conflict
// must refresh its view: found on the test node, where the old primary
// otherwise retried the takeover with the same stale view for 30 s.
func testStalledWatch(t *testing.T, api *kubetest.APIServer, ns string) {
	var stalled atomic.Bool
	cfg := api.Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return stallingTransport{rt, &stalled} }
	cluster := newCluster()
	a := newStore(t, cfg, ns, cluster, "m0", fakeClock())
	b := newStore(t, api.Config(), ns, cluster, "m1", fakeClock())
	t.Cleanup(func() { stalled.Store(false) }) // before the stores close
	if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, b, "b sees m0", func(c *dcs.Cluster) bool { return c.Leader != nil && c.Leader.Holder == "m0" })
	stalled.Store(true)
	if err := a.ReleaseLeader(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, b, "b sees the lock free", func(c *dcs.Cluster) bool { return c.Leader == nil || c.Leader.Holder == "" })
	if err := b.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	if err := a.AcquireLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrConflict) {
		t.Fatalf("a takes the lock b holds, on a stale view: %v, want ErrConflict", err)
	}
	c, err := a.Cluster(ctx5(t))
	if err != nil || c.Leader == nil || c.Leader.Holder != "m1" {
		t.Fatalf("a's view after the conflict: %+v, %v; want m1 as leader (its watch is still stalled)", c.Leader, err)
	}
	if err := a.AcquireLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrHeld) {
		t.Fatalf("a's second attempt: %v, want ErrHeld", err)
	}
}

func TestAPIServerDies(t *testing.T) { testAPIServerDies(t) }
