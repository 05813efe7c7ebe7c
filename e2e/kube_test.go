package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlha/mysqlha/agent/podrole"
	dcskube "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// The Kubernetes mode (Options.Kubernetes) runs the agents with
// --dcs=kubernetes against a real kube-apiserver, with the Pods as API objects
// only: no kubelet runs, so the harness plays its part (spec.nodeName, then
// status podIP and Ready through pods/status). mysqld and the agents still
// run as processes on loopback and advertise 127.0.0.1 addresses; the pod IPs
// (198.18.0.0/15, the benchmarking range) are data for the EndpointSlices.
//
// One kube-apiserver and one kube-controller-manager (EndpointSlice
// controller) serve every Kubernetes scenario of the test process: they are
// started by the first scenario that needs them and stopped when the package
// ends. Each cluster lives in its own namespace (the cluster's name), with
// the agent's Role (the rules dcs/kubernetes and agent/podrole declare, which
// deploy/base/rbac.yaml grants) bound to kubetest.UnprivilegedUser, whom the
// agents authenticate as: they run with those rights and no more. agentctl
// uses the admin kubeconfig, as an operator would.

const (
	kubeNode     = "e2e-node"
	kubePodLabel = "app.kubernetes.io/name"
	kubePodValue = "mysqlha-e2e"
	// Label keys the agents write (podrole defaults).
	roleLabel    = podrole.DefaultRoleLabel
	clusterLabel = podrole.DefaultClusterLabel
)

// sharedKube is the package's control plane, started on first use.
var sharedKube struct {
	once   sync.Once
	dir    string
	api    *kubetest.APIServer
	cm     *kubetest.ControllerManager
	client kubernetes.Interface
	err    error
}

// kubeAPI returns the shared kube-apiserver and an admin client, starting
// them (with the controller manager and the Node) on first use; every
// Kubernetes scenario fails with the start's error if it failed.
func kubeAPI(tb testing.TB) (*kubetest.APIServer, kubernetes.Interface) {
	tb.Helper()
	sharedKube.once.Do(func() {
		began := time.Now()
		sharedKube.err = startSharedKube()
		if sharedKube.err == nil {
			tb.Logf("shared kube-apiserver and kube-controller-manager ready in %v (%s)",
				time.Since(began).Round(time.Millisecond), sharedKube.api.URL())
		}
	})
	if sharedKube.err != nil {
		tb.Fatalf("e2e: the shared Kubernetes control plane: %v", sharedKube.err)
	}
	return sharedKube.api, sharedKube.client
}

func startSharedKube() error {
	dir, err := os.MkdirTemp("", "mysqlha-e2e-kube-")
	if err != nil {
		return err
	}
	sharedKube.dir = dir
	if sharedKube.api, err = kubetest.Launch(dir); err != nil {
		return err
	}
	if sharedKube.cm, err = sharedKube.api.LaunchControllerManager(); err != nil {
		return err
	}
	if sharedKube.client, err = kubernetes.NewForConfig(sharedKube.api.Config()); err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: kubeNode}}
	if _, err := sharedKube.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node %s: %w", kubeNode, err)
	}
	return nil
}

// stopSharedKube stops the shared control plane, if one was started; runMain
// calls it after the last test.
func stopSharedKube() {
	if sharedKube.cm != nil {
		sharedKube.cm.Kill()
	}
	if sharedKube.api != nil {
		sharedKube.api.Close()
	}
	if sharedKube.dir != "" {
		os.RemoveAll(sharedKube.dir)
	}
}

// KubeEnv is one cluster's Kubernetes objects: its namespace (named after
// the cluster), Pods, Services and the agents' Role.
type KubeEnv struct {
	API    *kubetest.APIServer
	Client kubernetes.Interface
	// Namespace holds everything of this cluster.
	Namespace string
	// AgentKubeconfig authenticates as kubetest.UnprivilegedUser, bound in
	// Namespace to the agent's Role only; AdminKubeconfig is for agentctl.
	AgentKubeconfig, AdminKubeconfig string
	cluster                          string
	podIPs                           map[string]string
}

// newKubeEnv creates the namespace, the agent's Role and RoleBinding, the
// primary and replicas Services and the kubeconfigs of a cluster.
func newKubeEnv(tb testing.TB, cluster, dir string) *KubeEnv {
	tb.Helper()
	api, client := kubeAPI(tb)
	k := &KubeEnv{API: api, Client: client, Namespace: cluster, cluster: cluster, podIPs: map[string]string{},
		AgentKubeconfig: filepath.Join(dir, "agent.kubeconfig"), AdminKubeconfig: filepath.Join(dir, "admin.kubeconfig")}
	api.CreateNamespace(tb, k.Namespace)
	api.WriteUnprivilegedKubeconfig(tb, k.AgentKubeconfig)
	api.WriteKubeconfig(tb, k.AdminKubeconfig)

	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	ns := k.Namespace
	// The agent's Role, as deploy/ grants it: the DCS backend's rules and
	// the pod labeler's.
	rules := append(dcskube.RBACRules(), podrole.RBACRules()...)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-agent"}, Rules: rules}
	if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("creating the agent's Role in %s: %v", ns, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-agent"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mysqlha-agent"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kubetest.UnprivilegedUser}},
	}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("binding the agent's Role in %s: %v", ns, err)
	}
	for svc, r := range map[string]string{k.PrimaryService(): "primary", k.ReplicasService(): "replica"} {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{clusterLabel: cluster, roleLabel: r},
				Ports:    []corev1.ServicePort{{Name: "mysql", Port: 3306, TargetPort: intstr.FromInt32(3306)}},
			},
		}
		if _, err := client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			tb.Fatalf("creating Service %s/%s: %v", ns, svc, err)
		}
	}
	return k
}

// PrimaryService and ReplicasService are the Services of deploy/, selecting
// the role labels.
func (k *KubeEnv) PrimaryService() string  { return k.cluster + "-primary" }
func (k *KubeEnv) ReplicasService() string { return k.cluster + "-replicas" }

// LeaseName is the leader lock.
func (k *KubeEnv) LeaseName() string { return k.cluster + "-leader" }

// createPod creates the Pod of member name on the shared Node and reports
// it Running and Ready with ip, as a kubelet would.
func (k *KubeEnv) createPod(tb testing.TB, name, ip string) {
	tb.Helper()
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	pods := k.Client.CoreV1().Pods(k.Namespace)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubePodLabel: kubePodValue}},
		Spec: corev1.PodSpec{
			NodeName:   kubeNode,
			Containers: []corev1.Container{{Name: "mysqld", Image: "mariadb:10.11"}, {Name: "agent", Image: "mysqlha-agent"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("creating pod %s/%s: %v", k.Namespace, name, err)
	}
	if err := kubetest.ReportPodReady(ctx, k.Client, pod, ip, "198.18.0.1"); err != nil {
		tb.Fatal(err)
	}
	k.podIPs[name] = ip
}

// agentArgs are the DCS flags of an agent.
func (k *KubeEnv) agentArgs() []string {
	return []string{"--dcs=kubernetes", "--kubeconfig=" + k.AgentKubeconfig, "--namespace=" + k.Namespace}
}

// ctlArgs are agentctl's DCS flags: the operator's (admin) kubeconfig.
func (k *KubeEnv) ctlArgs() []string {
	return []string{"--dcs=kubernetes", "--kubeconfig=" + k.AdminKubeconfig, "--namespace=" + k.Namespace}
}

// ---- observing the objects ----

// Lease reads the leader Lease; nil when it does not exist.
func (k *KubeEnv) Lease() (*coordinationv1.Lease, error) {
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	l, err := k.Client.CoordinationV1().Leases(k.Namespace).Get(ctx, k.LeaseName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// LeaseHolder is the leader Lease's holderIdentity ("" when unset or absent).
func (k *KubeEnv) LeaseHolder() (string, error) {
	l, err := k.Lease()
	if err != nil || l == nil || l.Spec.HolderIdentity == nil {
		return "", err
	}
	return *l.Spec.HolderIdentity, nil
}

// PodRole is pod's role label ("" when absent) and its cluster label.
func (k *KubeEnv) PodRole(pod string) (role, cluster string, err error) {
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	p, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	return p.Labels[roleLabel], p.Labels[clusterLabel], nil
}

// Roles maps every pod of the cluster to its role label ("" when absent).
func (k *KubeEnv) Roles() (map[string]string, error) {
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	pods, err := k.Client.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: kubePodLabel + "=" + kubePodValue})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Labels[roleLabel]
	}
	return out, nil
}

// Events lists the namespace's Events about pod, oldest first.
func (k *KubeEnv) Events(pod string) ([]corev1.Event, error) {
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	evs, err := k.Client.CoreV1().Events(k.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod,
	})
	if err != nil {
		return nil, err
	}
	items := evs.Items
	sort.SliceStable(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
	return items, nil
}

// EventsSince returns pod's Events with reason, recorded at or after since
// (Event timestamps have second resolution: since is truncated to it).
func (k *KubeEnv) EventsSince(pod, reason string, since time.Time) ([]corev1.Event, error) {
	evs, err := k.Events(pod)
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range evs {
		if e.Reason == reason && !e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
			out = append(out, e)
		}
	}
	return out, nil
}

// describeEvents renders the namespace's Events, for failure messages.
func (k *KubeEnv) describeEvents() string {
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	evs, err := k.Client.CoreV1().Events(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "  (listing Events: " + err.Error() + ")"
	}
	items := evs.Items
	sort.SliceStable(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
	var b strings.Builder
	for _, e := range items {
		fmt.Fprintf(&b, "  %s %s pod/%s %s (by %s): %s\n", e.LastTimestamp.UTC().Format("15:04:05"), e.Type,
			e.InvolvedObject.Name, e.Reason, e.ReportingInstance, e.Message)
	}
	return b.String()
}

// EndpointPods lists the pods behind svc's ready endpoints, sorted, and
// checks that each endpoint's address is that pod's IP.
func (k *KubeEnv) EndpointPods(svc string) ([]string, error) {
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	sl, err := k.Client.DiscoveryV1().EndpointSlices(k.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	if err != nil {
		return nil, err
	}
	var pods []string
	for _, s := range sl.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 || ep.TargetRef == nil {
				continue
			}
			if want := k.podIPs[ep.TargetRef.Name]; ep.Addresses[0] != want {
				return nil, fmt.Errorf("endpoint of %s has address %s, want its pod IP %s", ep.TargetRef.Name, ep.Addresses[0], want)
			}
			pods = append(pods, ep.TargetRef.Name)
		}
	}
	sort.Strings(pods)
	return pods, nil
}

// describe summarises the Lease, the role labels and the Services'
// endpoints, for failure messages.
func (k *KubeEnv) describe() string {
	holder, err := k.LeaseHolder()
	roles, rerr := k.Roles()
	prim, perr := k.EndpointPods(k.PrimaryService())
	repl, eerr := k.EndpointPods(k.ReplicasService())
	var names []string
	for n := range roles {
		names = append(names, n)
	}
	sort.Strings(names)
	var labels []string
	for _, n := range names {
		labels = append(labels, n+"="+cond(roles[n] == "", "(none)")+roles[n])
	}
	return fmt.Sprintf("  Lease %s holderIdentity=%q (err %v)\n  role labels: %s (err %v)\n  Service %s endpoints: %v (err %v)\n  Service %s endpoints: %v (err %v)\n",
		k.LeaseName(), holder, err, strings.Join(labels, " "), rerr, k.PrimaryService(), prim, perr, k.ReplicasService(), repl, eerr)
}

// Routed checks that the Kubernetes objects agree that primary leads: the
// Lease holder, the role labels (primary on it, replica on every other pod in
// replicas, no role label on the pods in unlabelled) and both Services'
// endpoints.
func (k *KubeEnv) Routed(primary string, replicas, unlabelled []string) (bool, string) {
	holder, err := k.LeaseHolder()
	if err != nil || holder != primary {
		return false, fmt.Sprintf("Lease holder %q (err %v), want %s\n%s", holder, err, primary, k.describe())
	}
	roles, err := k.Roles()
	if err != nil {
		return false, err.Error()
	}
	want := map[string]string{primary: "primary"}
	for _, r := range replicas {
		want[r] = "replica"
	}
	for _, u := range unlabelled {
		want[u] = ""
	}
	for pod, role := range want {
		if roles[pod] != role {
			return false, fmt.Sprintf("pod %s has role label %q, want %q\n%s", pod, roles[pod], role, k.describe())
		}
	}
	prim, err := k.EndpointPods(k.PrimaryService())
	if err != nil || !slices.Equal(prim, []string{primary}) {
		return false, fmt.Sprintf("Service %s endpoints %v (err %v), want [%s]\n%s", k.PrimaryService(), prim, err, primary, k.describe())
	}
	wantRepl := slices.Sorted(slices.Values(replicas))
	repl, err := k.EndpointPods(k.ReplicasService())
	if err != nil || !slices.Equal(repl, wantRepl) {
		return false, fmt.Sprintf("Service %s endpoints %v (err %v), want %v\n%s", k.ReplicasService(), repl, err, wantRepl, k.describe())
	}
	return true, ""
}

// WaitRouted waits until Routed holds.
func (k *KubeEnv) WaitRouted(tb testing.TB, timeout time.Duration, primary string, replicas, unlabelled []string) {
	tb.Helper()
	waitFor(tb, timeout, fmt.Sprintf("the Lease, the role labels and the Services to name %s the primary", primary), func() (bool, string) {
		return k.Routed(primary, replicas, unlabelled)
	})
}

// waitEvent waits for an Event with reason on pod, recorded by the agent of
// reporter at or after since, and returns it.
func (k *KubeEnv) waitEvent(tb testing.TB, timeout time.Duration, pod, reason, reporter string, since time.Time) corev1.Event {
	tb.Helper()
	var got corev1.Event
	waitFor(tb, timeout, fmt.Sprintf("a %s Event on pod %s recorded by %s's agent", reason, pod, reporter), func() (bool, string) {
		evs, err := k.EventsSince(pod, reason, since)
		for _, e := range evs {
			if e.ReportingInstance == reporter && e.InvolvedObject.Kind == "Pod" {
				got = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("err %v; Events of the namespace:\n%s", err, k.describeEvents())
	})
	return got
}

// names returns the members' names.
func names(ms []*Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}
