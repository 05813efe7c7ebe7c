package podrole_test

// The package's behaviour against a real kube-apiserver (kubetest): label
// round trips, the atomic RemovePrimary, Events, and RBAC (RBACRules
// suffices, and every rule in it is needed). One server is shared by
// parallel subtests, each in its own namespace.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlha/mysqlha/agent/podrole"
	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

const (
	cluster = "c1"
	// Generous: the apiserver shares the machine with parallel test binaries.
	pollTimeout = 20 * time.Second
)

type env struct {
	srv    *kubetest.APIServer
	admin  kubernetes.Interface
	unpriv kubernetes.Interface
}

var nsCounter atomic.Int32

// namespace creates a fresh namespace for one subtest.
func (e *env) namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("podrole-%d", nsCounter.Add(1))
	e.srv.CreateNamespace(t, name)
	return name
}

// pod creates a minimal Pod (no kubelet runs; it stays Pending) with labels.
func (e *env) pod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mysqld", Image: "mariadb:11"}}},
	}
	p, err := e.admin.CoreV1().Pods(ns).Create(ctx(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return p
}

func (e *env) get(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := e.admin.CoreV1().Pods(ns).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting pod %s/%s: %v", ns, name, err)
	}
	return p
}

// grant binds a Role with rules to kubetest.UnprivilegedUser in ns and waits
// until the authorizer allows every verb in it (RBAC is cached in the
// apiserver and lags the write).
func (e *env) grant(t *testing.T, ns string, rules []rbacv1.PolicyRule) {
	t.Helper()
	c := ctx(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-agent", Namespace: ns}, Rules: rules}
	if _, err := e.admin.RbacV1().Roles(ns).Create(c, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating role: %v", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-agent", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mysqlha-agent"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubetest.UnprivilegedUser}},
	}
	if _, err := e.admin.RbacV1().RoleBindings(ns).Create(c, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating role binding: %v", err)
	}
	for _, r := range rules {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				poll(t, fmt.Sprintf("%s %s allowed in %s", verb, res, ns), func() bool {
					ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: r.APIGroups[0], Resource: res},
					}}
					got, err := e.unpriv.AuthorizationV1().SelfSubjectAccessReviews().Create(c, ssar, metav1.CreateOptions{})
					return err == nil && got.Status.Allowed
				})
			}
		}
	}
}

// labeler returns a Labeler for ns on the given client, closed at cleanup.
func labeler(t *testing.T, client kubernetes.Interface, ns string, keys podrole.LabelKeys, logger *zap.Logger) *podrole.Labeler {
	t.Helper()
	if logger == nil {
		logger = zaptest.NewLogger(t)
	}
	l, err := podrole.NewLabeler(podrole.Client{Pods: client.CoreV1().Pods(ns), Events: client.CoreV1().Events(ns)}, ns, keys, "db-0", logger)
	if err != nil {
		t.Fatalf("NewLabeler: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", pollTimeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantLabels fails t unless p's labels are exactly want.
func wantLabels(t *testing.T, step string, p *corev1.Pod, want map[string]string) {
	t.Helper()
	if len(p.Labels) != len(want) {
		t.Fatalf("%s: labels %v, want %v", step, p.Labels, want)
	}
	for k, v := range want {
		if got, ok := p.Labels[k]; !ok || got != v {
			t.Fatalf("%s: labels %v, want %v", step, p.Labels, want)
		}
	}
}

func TestAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (kubetest)")
	}
	begin := time.Now()
	srv := kubetest.Start(t)
	t.Logf("kube-apiserver ready in %v", time.Since(begin).Round(time.Millisecond))
	unpriv, err := kubernetes.NewForConfig(srv.UnprivilegedConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, admin: srv.Client(t), unpriv: unpriv}

	t.Run("SetRoleRoundTrip", e.testSetRoleRoundTrip)
	t.Run("SetRoleCustomKeys", e.testSetRoleCustomKeys)
	t.Run("SetRoleMissingPod", e.testSetRoleMissingPod)
	t.Run("RemovePrimary", e.testRemovePrimary)
	t.Run("RemovePrimaryRacesRelabel", e.testRemovePrimaryRacesRelabel)
	t.Run("PodGone", e.testPodGone)
	t.Run("PodDown", e.testPodDown)
	t.Run("Events", e.testEvents)
	t.Run("CloseFlushesEvents", e.testCloseFlushesEvents)
	t.Run("LeastPrivilegeSuffices", e.testLeastPrivilegeSuffices)
	t.Run("ForbiddenNamesVerbAndFix", e.testForbidden)
	t.Run("PrimaryRoute", e.testPrimaryRoute)
	t.Run("PrimaryRouteRBAC", e.testPrimaryRouteRBAC)
}

func (e *env) testSetRoleRoundTrip(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	e.pod(t, ns, "db-0", map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"})
	l := labeler(t, e.admin, ns, podrole.LabelKeys{}, nil)
	c := ctx(t)
	base := map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"}
	with := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}

	// want is built per step: base grows as another writer adds labels.
	want := func(r dcs.Role) map[string]string {
		if r == dcs.RoleUnknown {
			return with(podrole.DefaultClusterLabel, cluster)
		}
		return with(podrole.DefaultClusterLabel, cluster, podrole.DefaultRoleLabel, r.String())
	}
	for _, role := range []dcs.Role{dcs.RolePrimary, dcs.RoleReplica, dcs.RoleUnknown, dcs.RolePrimary} {
		if err := l.SetRole(c, "db-0", cluster, role); err != nil {
			t.Fatalf("SetRole(%s): %v", role, err)
		}
		p := e.get(t, ns, "db-0")
		wantLabels(t, "after SetRole("+role.String()+")", p, want(role))

		// Idempotent, and without a write: the resourceVersion is unchanged.
		if err := l.SetRole(c, "db-0", cluster, role); err != nil {
			t.Fatalf("repeated SetRole(%s): %v", role, err)
		}
		if again := e.get(t, ns, "db-0"); again.ResourceVersion != p.ResourceVersion {
			t.Fatalf("repeated SetRole(%s) wrote the pod: resourceVersion %s -> %s", role, p.ResourceVersion, again.ResourceVersion)
		}

		// Another writer's label, added between our calls, survives ours.
		base["other-writer"] = role.String()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"other-writer":%q}}}`, role.String())
		if _, err := e.admin.CoreV1().Pods(ns).Patch(c, "db-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The last step's other-writer label is still there after a role change.
	if err := l.SetRole(c, "db-0", cluster, dcs.RoleReplica); err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "final", e.get(t, ns, "db-0"), want(dcs.RoleReplica))
}

func (e *env) testSetRoleCustomKeys(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	e.pod(t, ns, "db-0", map[string]string{"app": "db"})
	e.pod(t, ns, "db-1", nil)
	keys := podrole.LabelKeys{Cluster: "app.kubernetes.io/instance", Role: "example.com/db-role"}
	l := labeler(t, e.admin, ns, keys, nil)
	c := ctx(t)
	if err := l.SetRole(c, "db-0", "orders", dcs.RolePrimary); err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "custom keys", e.get(t, ns, "db-0"),
		map[string]string{"app": "db", "app.kubernetes.io/instance": "orders", "example.com/db-role": "primary"})
	// A pod with no labels at all (labels map absent in JSON).
	if err := l.SetRole(c, "db-1", "orders", dcs.RoleReplica); err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "no labels before", e.get(t, ns, "db-1"),
		map[string]string{"app.kubernetes.io/instance": "orders", "example.com/db-role": "replica"})
	// RemovePrimary's JSON pointer escapes the "/" of a custom key.
	if err := l.RemovePrimary(c, "db-0"); err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "custom key removed", e.get(t, ns, "db-0"),
		map[string]string{"app": "db", "app.kubernetes.io/instance": "orders"})
}

func (e *env) testSetRoleMissingPod(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	l := labeler(t, e.admin, ns, podrole.LabelKeys{}, nil)
	err := l.SetRole(ctx(t), "ghost", cluster, dcs.RolePrimary)
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "labelling pod ghost as primary: ") {
		t.Fatalf("SetRole on a missing pod: %v, want a wrapped 404", err)
	}
}

func (e *env) testRemovePrimary(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	l := labeler(t, e.admin, ns, podrole.LabelKeys{}, nil)
	c := ctx(t)
	primary := map[string]string{"app": "db", podrole.DefaultClusterLabel: cluster, podrole.DefaultRoleLabel: "primary"}
	replica := map[string]string{"app": "db", podrole.DefaultClusterLabel: cluster, podrole.DefaultRoleLabel: "replica"}
	noRole := map[string]string{"app": "db", podrole.DefaultClusterLabel: cluster}
	e.pod(t, ns, "old-leader", primary)
	rep := e.pod(t, ns, "replica", replica)
	bare := e.pod(t, ns, "bare", nil)

	if err := l.RemovePrimary(c, "old-leader"); err != nil {
		t.Fatalf("RemovePrimary(primary pod): %v", err)
	}
	wantLabels(t, "primary pod", e.get(t, ns, "old-leader"), noRole)
	// Again: the label is gone now, the test op fails, still success.
	if err := l.RemovePrimary(c, "old-leader"); err != nil {
		t.Fatalf("RemovePrimary twice: %v", err)
	}

	if err := l.RemovePrimary(c, "replica"); err != nil {
		t.Fatalf("RemovePrimary(replica pod): %v", err)
	}
	if p := e.get(t, ns, "replica"); p.ResourceVersion != rep.ResourceVersion {
		t.Fatalf("RemovePrimary wrote a replica pod: labels %v", p.Labels)
	}
	wantLabels(t, "replica pod", e.get(t, ns, "replica"), replica)

	if err := l.RemovePrimary(c, "bare"); err != nil {
		t.Fatalf("RemovePrimary(pod without labels): %v", err)
	}
	if p := e.get(t, ns, "bare"); p.ResourceVersion != bare.ResourceVersion || len(p.Labels) != 0 {
		t.Fatalf("RemovePrimary wrote a pod without labels: %v", p.Labels)
	}

	if err := l.RemovePrimary(c, "gone"); err != nil {
		t.Fatalf("RemovePrimary(missing pod): %v", err)
	}
}

// The old leader's agent relabels itself replica while the new leader drops
// its primary label: whatever the interleaving, the result must be replica.
// A read-then-remove implementation loses this race some of the time.
func (e *env) testRemovePrimaryRacesRelabel(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	newLeader := labeler(t, e.admin, ns, podrole.LabelKeys{}, zap.NewNop())
	oldLeader := labeler(t, e.admin, ns, podrole.LabelKeys{}, zap.NewNop())
	c := ctx(t)
	const rounds = 15
	for i := 0; i < rounds; i++ {
		name := fmt.Sprintf("db-%d", i)
		e.pod(t, ns, name, map[string]string{podrole.DefaultClusterLabel: cluster, podrole.DefaultRoleLabel: "primary"})
		var wg sync.WaitGroup
		var errRemove, errSet error
		wg.Add(2)
		go func() { defer wg.Done(); errRemove = newLeader.RemovePrimary(c, name) }()
		go func() { defer wg.Done(); errSet = oldLeader.SetRole(c, name, cluster, dcs.RoleReplica) }()
		wg.Wait()
		if errRemove != nil || errSet != nil {
			t.Fatalf("round %d: RemovePrimary: %v, SetRole: %v", i, errRemove, errSet)
		}
		if got := e.get(t, ns, name).Labels[podrole.DefaultRoleLabel]; got != "replica" {
			t.Fatalf("round %d: role label %q after concurrent RemovePrimary and SetRole(replica), want replica", i, got)
		}
	}
}

// listEvents lists the Events whose involvedObject is the pod with uid.
// PodGone is true only on the API server's own "not found": a pod that
// exists, and a read the server refuses, are not gone (a refusal is an
// error naming the missing permission).
func (e *env) testPodGone(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	e.pod(t, ns, "db-0", nil)
	e.grant(t, ns, podrole.RBACRules())
	l := labeler(t, e.unpriv, ns, podrole.LabelKeys{}, nil)
	c := ctx(t)
	if gone, err := l.PodGone(c, "db-0"); gone || err != nil {
		t.Fatalf("PodGone(existing pod) = %v, %v; want false, nil", gone, err)
	}
	if gone, err := l.PodGone(c, "db-3"); !gone || err != nil {
		t.Fatalf("PodGone(missing pod) = %v, %v; want true, nil", gone, err)
	}
	denied := labeler(t, e.unpriv, e.namespace(t), podrole.LabelKeys{}, nil)
	if gone, err := denied.PodGone(c, "db-3"); gone || !errors.Is(err, podrole.ErrForbidden) || !strings.Contains(err.Error(), "get pods") {
		t.Fatalf("PodGone without RBAC = %v, %v; want false and a forbidden error naming get pods", gone, err)
	}
	if _, err := l.PodGone(c, "Not_A_Pod"); err == nil {
		t.Fatal("PodGone accepted an invalid pod name")
	}
}

// PodDown reads the containers' states the kubelet wrote into the pod's
// status: stopped only when every container is, and only for the pod of
// the UID asked about.
func (e *env) testPodDown(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	c := ctx(t)
	p, err := e.admin.CoreV1().Pods(ns).Create(c, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "mariadb", Image: "mariadb:11"}, {Name: "agent", Image: "mysqlha-agent"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.grant(t, ns, podrole.RBACRules())
	l := labeler(t, e.unpriv, ns, podrole.LabelKeys{}, nil)
	uid := string(p.UID)
	setStates := func(states ...corev1.ContainerState) {
		t.Helper()
		cur := e.get(t, ns, "db-0")
		cur.Status.ContainerStatuses = nil
		for i, st := range states {
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses,
				corev1.ContainerStatus{Name: []string{"mariadb", "agent"}[i], Image: "x", ImageID: "x", State: st})
		}
		if _, err := e.admin.CoreV1().Pods(ns).UpdateStatus(c, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("writing the pod's status: %v", err)
		}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	killed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	for _, tc := range []struct {
		name   string
		states []corev1.ContainerState
		uid    string
		want   string
	}{
		{"no status yet (Pending)", nil, uid, ""},
		{"both running", []corev1.ContainerState{running, running}, uid, ""},
		{"the agent alone stopped: its server may take writes", []corev1.ContainerState{running, killed}, uid, ""},
		{"both stopped", []corev1.ContainerState{killed, waiting}, uid, "mariadb: terminated (Error, exit 137); agent: waiting (PodInitializing)"},
		{"both stopped, but another pod of that name", []corev1.ContainerState{killed, killed}, "another-uid", ""},
	} {
		setStates(tc.states...)
		if got, err := l.PodDown(c, "db-0", tc.uid); got != tc.want || err != nil {
			t.Errorf("%s: PodDown = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if got, err := l.PodDown(c, "db-9", uid); got != "" || err != nil {
		t.Errorf("PodDown(missing pod) = %q, %v; want \"\", nil", got, err)
	}
}

func (e *env) listEvents(t *testing.T, ns string, sel fields.Set) []corev1.Event {
	t.Helper()
	list, err := e.admin.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: fields.SelectorFromSet(sel).String()})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	return list.Items
}

func (e *env) testEvents(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	pod := e.pod(t, ns, "db-0", nil)
	l := labeler(t, e.admin, ns, podrole.LabelKeys{}, nil)
	// That Event does not wait for the API server is proven in
	// TestEventNeverBlocksAndCloseIsBounded; here: what gets recorded.
	l.Event(ctx(t), "db-0", podrole.EventTypeNormal, podrole.ReasonPromoted, "promoted: GTID caught up")

	// The selector kubectl describe pod uses: kind, name, namespace and uid.
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": "db-0", "involvedObject.namespace": ns,
		"involvedObject.uid": string(pod.UID), "reason": podrole.ReasonPromoted}
	var evs []corev1.Event
	poll(t, "the Promoted event", func() bool { evs = e.listEvents(t, ns, sel); return len(evs) > 0 })
	ev := evs[0]
	if len(evs) != 1 || ev.Type != corev1.EventTypeNormal || ev.Message != "promoted: GTID caught up" ||
		ev.Source.Component != podrole.Component || ev.ReportingInstance != "db-0" || ev.Count != 1 ||
		ev.LastTimestamp.IsZero() || ev.InvolvedObject.APIVersion != "v1" {
		t.Fatalf("recorded events %+v, want one Normal Promoted from %s/db-0", evs, podrole.Component)
	}
}

func (e *env) testCloseFlushesEvents(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	e.pod(t, ns, "db-0", nil)
	l, err := podrole.NewLabeler(podrole.Client{Pods: e.admin.CoreV1().Pods(ns), Events: e.admin.CoreV1().Events(ns)}, ns,
		podrole.LabelKeys{}, "db-1", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	reasons := []string{podrole.ReasonLeaderLost, podrole.ReasonFenced, podrole.ReasonDemoted, podrole.ReasonFailover}
	for _, r := range reasons {
		l.Event(ctx(t), "db-0", podrole.EventTypeWarning, r, "flush test")
	}
	// An Event about a pod that does not exist is still recorded (no UID).
	l.Event(ctx(t), "db-9", podrole.EventTypeWarning, podrole.ReasonSwitchover, "no such pod")
	l.Close()
	// No polling: Close returns only after the queue is written.
	evs := e.listEvents(t, ns, fields.Set{"involvedObject.name": "db-0"})
	if len(evs) != len(reasons) {
		t.Fatalf("%d events after Close, want %d: %+v", len(evs), len(reasons), evs)
	}
	got := map[string]bool{}
	for _, ev := range evs {
		got[ev.Reason] = true
	}
	for _, r := range reasons {
		if !got[r] {
			t.Errorf("event %s missing after Close", r)
		}
	}
	if evs := e.listEvents(t, ns, fields.Set{"involvedObject.name": "db-9"}); len(evs) != 1 || evs[0].InvolvedObject.UID != "" {
		t.Errorf("event about a missing pod: %+v, want one without uid", evs)
	}
}

// A user with exactly RBACRules() bound in the namespace can do everything
// the package does, without a single 403 (also none logged by the Event
// writer).
func (e *env) testLeastPrivilegeSuffices(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	e.pod(t, ns, "db-0", map[string]string{"app": "db"})
	e.pod(t, ns, "db-1", map[string]string{podrole.DefaultClusterLabel: cluster, podrole.DefaultRoleLabel: "primary"})
	e.grant(t, ns, podrole.RBACRules())
	core, logs := observer.New(zap.InfoLevel)
	l := labeler(t, e.unpriv, ns, podrole.LabelKeys{}, zap.New(core))
	c := ctx(t)
	for _, r := range []dcs.Role{dcs.RolePrimary, dcs.RoleReplica, dcs.RoleUnknown, dcs.RolePrimary} {
		if err := l.SetRole(c, "db-0", cluster, r); err != nil {
			t.Fatalf("SetRole(%s) with RBACRules: %v", r, err)
		}
	}
	for _, pod := range []string{"db-1", "db-0", "db-1", "missing"} {
		if err := l.RemovePrimary(c, pod); err != nil {
			t.Fatalf("RemovePrimary(%s) with RBACRules: %v", pod, err)
		}
	}
	l.Event(c, "db-0", podrole.EventTypeNormal, podrole.ReasonSwitchover, "switchover to db-0")
	l.Close()
	if n := logs.FilterLevelExact(zap.WarnLevel).Len() + logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 {
		t.Fatalf("%d warnings with RBACRules: %v", n, logs.All())
	}
	if evs := e.listEvents(t, ns, fields.Set{"reason": podrole.ReasonSwitchover}); len(evs) != 1 || evs[0].InvolvedObject.UID == "" {
		t.Fatalf("events %+v, want one Switchover about db-0 with its uid", evs)
	}
	wantLabels(t, "db-0", e.get(t, ns, "db-0"), map[string]string{"app": "db", podrole.DefaultClusterLabel: cluster})
	wantLabels(t, "db-1", e.get(t, ns, "db-1"), map[string]string{podrole.DefaultClusterLabel: cluster})
}

// Every rule in RBACRules is needed: without it the operation that uses it
// fails (or, for Events, logs) with a message naming the verb, the resource
// and the fix.
func (e *env) testForbidden(t *testing.T) {
	t.Parallel()
	getPods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	patchPods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}}
	createEvents := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule // nil: no binding at all
		// "" = SetRole/RemovePrimary must succeed.
		setRoleErr, removeErr string
		eventErr              string // "" = the Event must be recorded
	}{
		{name: "NoBinding", setRoleErr: "get pods", removeErr: "patch pods", eventErr: "create events"},
		{name: "NoGetPods", rules: []rbacv1.PolicyRule{patchPods, createEvents}, setRoleErr: "get pods"},
		{name: "NoPatchPods", rules: []rbacv1.PolicyRule{getPods, createEvents}, setRoleErr: "patch pods", removeErr: "patch pods"},
		{name: "NoCreateEvents", rules: []rbacv1.PolicyRule{getPods, patchPods}, eventErr: "create events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := e.namespace(t)
			e.pod(t, ns, "db-0", map[string]string{podrole.DefaultClusterLabel: cluster, podrole.DefaultRoleLabel: "primary"})
			if tc.rules != nil {
				e.grant(t, ns, tc.rules)
			}
			core, logs := observer.New(zap.InfoLevel)
			l := labeler(t, e.unpriv, ns, podrole.LabelKeys{}, zap.New(core))
			c := ctx(t)
			check := func(op string, err error, want string) {
				t.Helper()
				if want == "" {
					if err != nil {
						t.Errorf("%s: %v", op, err)
					}
					return
				}
				if !errors.Is(err, podrole.ErrForbidden) || !apierrors.IsForbidden(err) {
					t.Fatalf("%s: %v, want ErrForbidden wrapping a 403", op, err)
				}
				t.Logf("%s: %v", op, err)
				for _, s := range []string{"the agent may not " + want + " in namespace " + ns, "apply the RBAC in deploy/"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%s: error %q does not say %q", op, err, s)
					}
				}
			}
			check("SetRole", l.SetRole(c, "db-0", cluster, dcs.RoleReplica), tc.setRoleErr)
			// After a failed SetRole the label is still primary: RemovePrimary has work.
			check("RemovePrimary", l.RemovePrimary(c, "db-0"), tc.removeErr)
			l.Event(c, "db-0", podrole.EventTypeNormal, podrole.ReasonDemoted, "forbidden test")
			l.Close()
			failed := logs.FilterMessage("event not recorded").All()
			if tc.eventErr == "" {
				if len(failed) != 0 {
					t.Errorf("event not recorded: %v", failed[0].ContextMap())
				}
				return
			}
			if len(failed) != 1 || !strings.Contains(fmt.Sprint(failed[0].ContextMap()["error"]), "the agent may not "+tc.eventErr) {
				t.Errorf("Event without %s: logs %v, want one warning naming the verb", tc.eventErr, logs.All())
			}
		})
	}
}
