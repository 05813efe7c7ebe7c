package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	dcskube "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// The Kubernetes mode runs the same cluster with --dcs=kubernetes against a
// real kube-apiserver (storage: another embedded etcd) and
// kube-controller-manager (EndpointSlices), both started by
// testenv/kubetest, the tests' harness. No kubelet runs: the demo creates
// the Pod objects and reports them Running and Ready through pods/status,
// as a kubelet would, with addresses from the benchmarking range
// 198.18.0.0/15 (EndpointSlices reject loopback). Those addresses are data
// only: mysqld and the agents still talk over loopback
// (--advertise-mysql-addr, --advertise-api-url).
const (
	// kubeAdminUser is the demo's and agentctl's identity (system:masters).
	kubeAdminUser = "mysqlha-demo-admin"
	// kubeAgentUser is the agents' identity: bound to a Role with exactly the
	// rules the agent declares (leases; pods get/patch; events create).
	kubeAgentUser = "mysqlha-agent"
	kubeNamespace = "mysqlha-demo"
	kubeNode      = "demo-node"
	// The agent's default label keys (README, agent/podrole).
	clusterLabel = "mysqlha.io/cluster"
	roleLabel    = "mysqlha.io/role"
	// showTimeout bounds how long show waits for the objects to agree.
	showTimeout = 20 * time.Second
)

// kubeBackend is the Kubernetes mode's DCS: a kube-apiserver and
// kube-controller-manager as child processes, and the cluster's objects.
type kubeBackend struct {
	cfg     Config
	dir     string
	api     *kubetest.APIServer // with its own embedded etcd
	cm      *kubetest.ControllerManager
	client  kubernetes.Interface
	track   func(pid int, what string)
	podIP   map[string]string
	seenEvt map[string]bool
	// Kubeconfigs: the admin's (agentctl) and the agents' (their Role only).
	adminKubeconfig, agentKubeconfig string
}

var _ backend = (*kubeBackend)(nil)

func (k *kubeBackend) primaryService() string  { return k.cfg.Cluster + "-primary" }
func (k *kubeBackend) replicasService() string { return k.cfg.Cluster + "-replicas" }
func (k *kubeBackend) leaseName() string       { return k.cfg.Cluster + "-leader" }

// start brings up etcd, the apiserver, the controller manager and the
// cluster's namespace, Node, RBAC and Services. On error, stop cleans up
// whatever did start.
func (k *kubeBackend) start(ctx context.Context, p *progress) error {
	k.dir = filepath.Join(k.cfg.Dir, "k8s")
	p.start("starting kube-apiserver (%s) on an embedded etcd (in this process)", k.cfg.KubeBinDir)
	var err error
	k.api, err = kubetest.Launch(k.dir, kubetest.WithBinDir(k.cfg.KubeBinDir), kubetest.WithUserNames(kubeAdminUser, kubeAgentUser))
	if err != nil {
		return err
	}
	k.track(k.api.Pid(), "kube-apiserver")
	p.done("%s ready; its storage: etcd %s", k.api.URL(), k.api.Etcd.Endpoints()[0])
	if k.client, err = kubernetes.NewForConfig(k.api.Config()); err != nil {
		return err
	}

	// Ready once the serviceaccount controller has created default/default.
	p.start("starting kube-controller-manager (EndpointSlice and ServiceAccount controllers)")
	if k.cm, err = k.api.LaunchControllerManager(); err != nil {
		return err
	}
	k.track(k.cm.Pid(), "kube-controller-manager")
	p.done("running")

	p.start("creating namespace %s, Node %s, the agents' RBAC Role and Services %s, %s",
		kubeNamespace, kubeNode, k.primaryService(), k.replicasService())
	if err := k.createObjects(ctx); err != nil {
		return err
	}
	k.adminKubeconfig = filepath.Join(k.dir, "admin.kubeconfig")
	k.agentKubeconfig = filepath.Join(k.dir, "agent.kubeconfig")
	if err := k.api.SaveKubeconfig(k.adminKubeconfig, kubeNamespace); err != nil {
		return err
	}
	if err := k.api.SaveUnprivilegedKubeconfig(k.agentKubeconfig, kubeNamespace); err != nil {
		return err
	}
	// For the curl line of tryLines.
	if err := os.WriteFile(k.adminTokenFile(), []byte(k.api.Config().BearerToken+"\n"), 0o600); err != nil {
		return err
	}
	p.done("created; the agents authenticate as %q, bound only to that Role", kubeAgentUser)
	return nil
}

func (k *kubeBackend) adminTokenFile() string { return filepath.Join(k.dir, "admin-token") }

func (k *kubeBackend) createObjects(ctx context.Context) error {
	c := k.client
	ns := kubeNamespace
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", what, err)
		}
		return nil
	}
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err := create("namespace", err); err != nil {
		return err
	}
	_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: kubeNode}}, metav1.CreateOptions{})
	if err := create("node", err); err != nil {
		return err
	}
	// The agent's Role, as deploy/base/rbac.yaml: the DCS backend's rules plus
	// the pod labeler's (pods get/patch, events create).
	rules := append(dcskube.RBACRules(),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	)
	_, err = c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-agent"}, Rules: rules}, metav1.CreateOptions{})
	if err := create("role", err); err != nil {
		return err
	}
	_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mysqlha-agent"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mysqlha-agent"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kubeAgentUser}},
	}, metav1.CreateOptions{})
	if err := create("rolebinding", err); err != nil {
		return err
	}
	for name, role := range map[string]string{k.primaryService(): "primary", k.replicasService(): "replica"} {
		_, err = c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{clusterLabel: k.cfg.Cluster, roleLabel: role},
				Ports:    []corev1.ServicePort{{Name: "mysql", Port: 3306, TargetPort: intstr.FromInt32(3306)}},
			},
		}, metav1.CreateOptions{})
		if err := create("service "+name, err); err != nil {
			return err
		}
	}
	return nil
}

// prepare creates one Pod per member and reports it Running and Ready.
func (k *kubeBackend) prepare(ctx context.Context, p *progress, ms []*member) error {
	var where []string
	for i, m := range ms {
		ip := fmt.Sprintf("198.18.0.%d", 11+i)
		k.podIP[m.name] = ip
		where = append(where, m.name+" "+ip)
	}
	p.start("creating Pods %s on Node %s and reporting them Running and Ready through pods/status, as a kubelet would", strings.Join(where, ", "), kubeNode)
	pods := k.client.CoreV1().Pods(kubeNamespace)
	for _, m := range ms {
		pod, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: map[string]string{"app": "mysqlha-demo"}},
			Spec: corev1.PodSpec{
				NodeName:   kubeNode,
				Containers: []corev1.Container{{Name: "mysqld", Image: "mariadb:10.11"}, {Name: "agent", Image: "mysqlha-agent"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", m.name, err)
		}
		if err := kubetest.ReportPodReady(ctx, k.client, pod, k.podIP[m.name], "198.18.0.1"); err != nil {
			return err
		}
	}
	p.done("created (the pod IPs are data for the EndpointSlices; mysqld and the agents talk over loopback)")
	return nil
}

func (k *kubeBackend) agentArgs(*member) []string {
	return []string{"--dcs=kubernetes", "--kubeconfig=" + k.agentKubeconfig, "--namespace=" + kubeNamespace}
}

func (k *kubeBackend) ctlArgs() []string {
	return []string{"--dcs=kubernetes", "--kubeconfig=" + k.adminKubeconfig, "--namespace=" + kubeNamespace}
}

func (k *kubeBackend) env() []string {
	// The kubeconfig's context names the namespace, as kubectl reads it.
	return []string{"MYSQLHA_DCS=kubernetes", "KUBECONFIG=" + k.adminKubeconfig}
}

func (k *kubeBackend) tryLines() []string {
	return []string{
		"",
		"The Kubernetes objects, through the API server (kubectl, if installed, works with the KUBECONFIG above):",
		"",
		fmt.Sprintf(`  k8s() { curl -s --cacert %s -H "Authorization: Bearer $(cat %s)" "%s$1"; }`,
			filepath.Join(k.api.Dir(), "ca.crt"), k.adminTokenFile(), k.api.URL()),
		fmt.Sprintf("  k8s /apis/coordination.k8s.io/v1/namespaces/%s/leases/%s                 # the lock", kubeNamespace, k.leaseName()),
		fmt.Sprintf("  k8s '/api/v1/namespaces/%s/pods?labelSelector=%s%%3Dprimary'        # the primary pod", kubeNamespace, roleLabel),
		fmt.Sprintf("  k8s '/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices?labelSelector=kubernetes.io/service-name%%3D%s'",
			kubeNamespace, k.primaryService()),
	}
}

// kubeView is what the demo shows of the cluster's objects.
type kubeView struct {
	holder       string
	transitions  int32
	renewed      string
	roles        map[string]string // pod -> role label ("" when none)
	primaryEPs   []string          // pod names of ready endpoints
	replicaEPs   []string
	primaryAddrs []string
	replicaAddrs []string
	err          error
}

// view reads the objects in causal order, effects first: endpoints follow
// labels, which follow the Lease, so a snapshot never shows an effect
// without its cause.
func (k *kubeBackend) view(ctx context.Context) kubeView {
	v := kubeView{roles: map[string]string{}}
	var err error
	if v.primaryEPs, v.primaryAddrs, err = k.endpoints(ctx, k.primaryService()); err != nil {
		v.err = err
	}
	if v.replicaEPs, v.replicaAddrs, err = k.endpoints(ctx, k.replicasService()); err != nil {
		v.err = err
	}
	pods, err := k.client.CoreV1().Pods(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=mysqlha-demo"})
	if err != nil {
		v.err = err
	} else {
		for _, p := range pods.Items {
			v.roles[p.Name] = p.Labels[roleLabel]
		}
	}
	lease, err := k.client.CoordinationV1().Leases(kubeNamespace).Get(ctx, k.leaseName(), metav1.GetOptions{})
	switch {
	case err == nil:
		if lease.Spec.HolderIdentity != nil {
			v.holder = *lease.Spec.HolderIdentity
		}
		if lease.Spec.LeaseTransitions != nil {
			v.transitions = *lease.Spec.LeaseTransitions
		}
		if lease.Spec.RenewTime != nil {
			v.renewed = lease.Spec.RenewTime.UTC().Format("15:04:05.000")
		}
	case !apierrors.IsNotFound(err):
		v.err = err
	}
	return v
}

// endpoints lists the ready endpoints of a Service's EndpointSlices: pod
// names and "ip (pod)" strings, sorted.
func (k *kubeBackend) endpoints(ctx context.Context, svc string) ([]string, []string, error) {
	sl, err := k.client.DiscoveryV1().EndpointSlices(kubeNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	if err != nil {
		return nil, nil, err
	}
	var pods, addrs []string
	for _, s := range sl.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			name := "?"
			if ep.TargetRef != nil {
				name = ep.TargetRef.Name
			}
			pods = append(pods, name)
			addrs = append(addrs, ep.Addresses[0]+" ("+name+")")
		}
	}
	sort.Strings(pods)
	sort.Strings(addrs)
	return pods, addrs, nil
}

// agrees: the Lease, the labels and both Services' endpoints all name
// primary, and every pod labelled replica is a replicas endpoint.
func (v kubeView) agrees(primary string) bool {
	if v.err != nil || v.holder != primary || !slices.Equal(v.primaryEPs, []string{primary}) {
		return false
	}
	var replicas []string
	for pod, role := range v.roles {
		switch {
		case role == "primary" && pod != primary:
			return false
		case pod == primary && role != "primary":
			return false
		case role == "replica":
			replicas = append(replicas, pod)
		}
	}
	sort.Strings(replicas)
	return slices.Equal(replicas, v.replicaEPs)
}

func (k *kubeBackend) show(ctx context.Context, p *progress, primary string) error {
	p.start("reading the Lease, pod labels and EndpointSlices (waiting until they all name %s)", primary)
	deadline := time.Now().Add(showTimeout)
	var v kubeView
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v = k.view(cctx)
		cancel()
		if v.agrees(primary) {
			p.done("they agree")
			break
		}
		if time.Now().After(deadline) {
			p.failed()
			k.printView(p, v)
			return fmt.Errorf("after %v the Kubernetes objects still do not all name %s as the primary (err: %v)", showTimeout, primary, v.err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	k.printView(p, v)
	k.printEvents(ctx, p)
	return nil
}

func (k *kubeBackend) printView(p *progress, v kubeView) {
	holder := v.holder
	if holder == "" {
		holder = "(none)"
	}
	p.detail("Lease %s/%s: holderIdentity=%s leaseTransitions=%d renewTime=%s", kubeNamespace, k.leaseName(), holder, v.transitions, v.renewed)
	var pods []string
	for pod := range v.roles {
		pods = append(pods, pod)
	}
	sort.Strings(pods)
	var labels []string
	for _, pod := range pods {
		role := v.roles[pod]
		if role == "" {
			role = "(none)"
		}
		labels = append(labels, pod+"="+role)
	}
	p.detail("Pods, label %s: %s", roleLabel, strings.Join(labels, "  "))
	p.detail("Service %s endpoints: %s", k.primaryService(), orNone(v.primaryAddrs))
	p.detail("Service %s endpoints: %s", k.replicasService(), orNone(v.replicaAddrs))
}

// printEvents prints the namespace's Events not shown yet (the agents'
// promotion, demotion and fencing records).
func (k *kubeBackend) printEvents(ctx context.Context, p *progress) {
	evs, err := k.client.CoreV1().Events(kubeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		p.detail("Events: %v", err)
		return
	}
	items := evs.Items
	// Timestamps have second resolution; the resourceVersion (etcd's
	// revision here) orders events within a second.
	sort.SliceStable(items, func(i, j int) bool {
		ti, tj := eventTime(items[i]), eventTime(items[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		ri, _ := strconv.ParseInt(items[i].ResourceVersion, 10, 64)
		rj, _ := strconv.ParseInt(items[j].ResourceVersion, 10, 64)
		return ri < rj
	})
	for _, e := range items {
		if k.seenEvt[string(e.UID)] {
			continue
		}
		k.seenEvt[string(e.UID)] = true
		p.detail("Event %s pod/%s %s: %s", e.Type, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// live is a one-line summary for the drill's transition lines.
func (k *kubeBackend) live(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v := k.view(cctx)
	if v.err != nil {
		return "k8s: " + v.err.Error()
	}
	var primaries []string
	for pod, role := range v.roles {
		if role == "primary" {
			primaries = append(primaries, pod)
		}
	}
	sort.Strings(primaries)
	holder := v.holder
	if holder == "" {
		holder = "none"
	}
	return fmt.Sprintf("| Lease: %s, role=primary label: %s, %s endpoints: %s",
		holder, orNone(primaries), k.primaryService(), orNone(v.primaryEPs))
}

func (k *kubeBackend) routed(ctx context.Context, primary string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return k.view(cctx).agrees(primary)
}

func (k *kubeBackend) routedNote() string {
	return fmt.Sprintf(", with the Lease, the pod labels and Service %s's endpoints all moved to it", k.primaryService())
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// stop kills the control plane: its state is thrown away with the work dir,
// so a graceful shutdown would only cost time.
func (k *kubeBackend) stop() {
	if k.cm != nil {
		k.cm.Kill()
	}
	if k.api != nil {
		k.api.Close()
	}
}

func (k *kubeBackend) dumpLogs(p *progress) {
	var logs []string
	if k.api != nil {
		logs = append(logs, k.api.LogFile())
	}
	if k.cm != nil {
		logs = append(logs, k.cm.LogFile())
	}
	for _, l := range logs {
		p.plain("----- last 15 lines of %s -----\n%s", l, localproc.Tail(l, 15))
	}
}
