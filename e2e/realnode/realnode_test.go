package realnode_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlha/mysqlha/e2e/realnode"
)

const (
	echoImage = "localhost/mysqlha/echo:1"
	ns        = "realnode-smoke"
)

// TestNodeRunsPods starts a node from nothing, runs two pods of a test image
// behind a ClusterIP Service, checks addresses, kube-proxy (from the host
// and from a pod), the in-cluster apiserver path of a ServiceAccount, and
// cutting a pod off inside its netns; then tears the node down, checks that
// nothing of it is left, and does it all again warm.
func TestNodeRunsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Kubernetes node (root, containerd, kubelet): not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A node whose test binary was killed is undone by the next Start; do
	// it now, so that it does not count as this node's doing.
	if err := realnode.UndoLeftovers(ctx, t.Logf); err != nil {
		t.Fatal(err)
	}
	before := snapshotHost(t)

	began := time.Now()
	n := realnode.Start(t)
	cold := time.Since(began)
	t.Logf("cold start (nothing to Node Ready, apiserver via ClusterIP): %v", cold.Round(time.Millisecond))
	if n.NodeName() != realnode.NodeName || n.NodeIP() != realnode.NodeIP {
		t.Fatalf("NodeName, NodeIP = %s, %s", n.NodeName(), n.NodeIP())
	}

	archive := filepath.Join(t.TempDir(), "echo.tar")
	if err := realnode.BuildGoImage(ctx, "testdata/echo", echoImage, archive); err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	podStart := time.Now()
	if err := n.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	svcIP := deployEcho(ctx, t, c)
	pods := waitPodsReady(ctx, t, c, "echo-0", "echo-1")
	t.Logf("2 pods Running and Ready %v after creation", time.Since(podStart).Round(time.Millisecond))

	_, podNet, _ := net.ParseCIDR(realnode.PodCIDR)
	_, svcNet, _ := net.ParseCIDR(realnode.ServiceCIDR)
	for _, p := range pods {
		if ip := net.ParseIP(p.Status.PodIP); ip == nil || !podNet.Contains(ip) {
			t.Errorf("pod %s IP %q not in %s", p.Name, p.Status.PodIP, realnode.PodCIDR)
		}
	}
	if ip := net.ParseIP(svcIP); ip == nil || !svcNet.Contains(ip) {
		t.Errorf("Service ClusterIP %q not in %s", svcIP, realnode.ServiceCIDR)
	}

	// kube-proxy from the host: the ClusterIP answers with one of the pods.
	names := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(names) < 2 && time.Now().Before(deadline) {
		if body, err := httpGet(ctx, "http://"+svcIP+"/"); err == nil {
			names[strings.TrimSpace(body)] = true
		}
	}
	if !names["echo-0"] || !names["echo-1"] {
		t.Errorf("ClusterIP %s answered with %v, want both echo-0 and echo-1", svcIP, names)
	}

	// From a pod: the apiserver in-cluster (ClusterIP of default/kubernetes,
	// token, CA, RBAC), and another pod through the Service.
	ip0, ip1 := pods[0].Status.PodIP, pods[1].Status.PodIP
	if body, err := httpGet(ctx, "http://"+ip0+":8080/kube"); err != nil || strings.TrimSpace(body) != "200" {
		t.Errorf("in-cluster GET of its own pod from echo-0: %q, %v; want 200", body, err)
	}
	fetch := "http://" + ip0 + ":8080/fetch?url=http://" + svcIP + "/"
	seen := map[string]bool{}
	for i := 0; i < 40 && !seen["echo-1"]; i++ {
		if body, err := httpGet(ctx, fetch); err == nil {
			seen[strings.TrimSpace(body)] = true
		}
	}
	if !seen["echo-1"] {
		t.Errorf("echo-0 never reached echo-1 through the Service (saw %v)", seen)
	}

	// Fault injection: a DROP rule inside echo-1's netns cuts it off from
	// the host and from echo-0; removing it heals the link.
	netns, err := n.PodNetns(ctx, ns, "echo-1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(netns, "/var/run/netns/cni-") {
		t.Errorf("PodNetns = %q, want /var/run/netns/cni-...", netns)
	}
	if _, err := os.Stat(netns); err != nil {
		t.Fatal(err)
	}
	rule := []string{"INPUT", "-p", "tcp", "--dport", "8080", "-j", "DROP"}
	nsenterIptables(t, netns, append([]string{"-A"}, rule...)...)
	if body, err := httpGet(ctx, "http://"+ip1+":8080/"); err == nil {
		t.Errorf("echo-1 answered the host (%q) with a DROP rule in its netns", body)
	}
	if body, err := httpGet(ctx, "http://"+ip0+":8080/fetch?url=http://"+ip1+":8080/"); err == nil && strings.TrimSpace(body) == "echo-1" {
		t.Errorf("echo-0 reached echo-1 with a DROP rule in echo-1's netns")
	}
	if body, err := httpGet(ctx, "http://"+ip0+":8080/"); err != nil || strings.TrimSpace(body) != "echo-0" {
		t.Errorf("echo-0 cut off too: %q, %v", body, err)
	}
	nsenterIptables(t, netns, append([]string{"-D"}, rule...)...)
	if body, err := httpGet(ctx, "http://"+ip1+":8080/"); err != nil || strings.TrimSpace(body) != "echo-1" {
		t.Errorf("echo-1 after removing the DROP rule: %q, %v", body, err)
	}

	stateDir := n.Dir()
	began = time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("teardown (2 pods running): %v", time.Since(began).Round(time.Millisecond))
	checkNothingLeft(t, before, stateDir)

	// Warm: the same again, with build caches and binaries in the page cache.
	began = time.Now()
	n = realnode.Start(t)
	warm := time.Since(began)
	t.Logf("warm start: %v (cold was %v)", warm.Round(time.Millisecond), cold.Round(time.Millisecond))
	if warm > 20*time.Second {
		t.Errorf("warm start took %v, want under 20 s", warm)
	}
	stateDir = n.Dir()
	began = time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("teardown (no pods): %v", time.Since(began).Round(time.Millisecond))
	checkNothingLeft(t, before, stateDir)
}

// deployEcho creates a ServiceAccount allowed to get pods,
// the Service "echo" and the pods echo-0 and echo-1, and returns the
// Service's ClusterIP.
func deployEcho(ctx context.Context, t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "echo"}}, metav1.CreateOptions{}))
	must(c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}))
	must(c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "echo"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "echo", Namespace: ns}},
	}, metav1.CreateOptions{}))
	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	for _, name := range []string{"echo-0", "echo-1"} {
		must(c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "echo"}},
			Spec: corev1.PodSpec{
				ServiceAccountName:            "echo",
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{
					Name:            "echo",
					Image:           echoImage,
					ImagePullPolicy: corev1.PullNever,
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
						PeriodSeconds: 1,
					},
				}},
			},
		}, metav1.CreateOptions{}))
	}
	return svc.Spec.ClusterIP
}

func waitPodsReady(ctx context.Context, t *testing.T, c kubernetes.Interface, names ...string) []*corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var pods []*corev1.Pod
		var notReady []string
		for _, name := range names {
			p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ready := p.Status.Phase == corev1.PodRunning
			if ready {
				ready = false
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
						ready = true
					}
				}
			}
			if !ready {
				notReady = append(notReady, fmt.Sprintf("%s: %s %v", name, p.Status.Phase, p.Status.ContainerStatuses))
			}
			pods = append(pods, p)
		}
		if len(notReady) == 0 {
			return pods
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods not Running and Ready within 60 s: %v", notReady)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	// A new connection each time, so that kube-proxy balances them.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

func nsenterIptables(t *testing.T, netns string, args ...string) {
	t.Helper()
	iptables, err := exec.LookPath("iptables")
	if err != nil {
		iptables = "/usr/sbin/iptables"
	}
	out, err := exec.Command("nsenter", append([]string{"--net=" + netns, iptables}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("iptables %v in %s: %v: %s", args, netns, err, out)
	}
}

// hostState is what a node may change on the machine. Other tests and
// programs may change the machine at the same time (another containerd, say),
// so checkNothingLeft looks only for what was added, and only for what looks
// like the node's.
type hostState struct {
	links, netns, mounts, chains, nftTables, cniResults, hostDirs []string
	sysctls                                                       map[string]string
}

func snapshotHost(t *testing.T) hostState {
	t.Helper()
	var s hostState
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifaces {
		s.links = append(s.links, i.Name)
	}
	s.netns = dirNames("/run/netns")
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			s.mounts = append(s.mounts, f[4])
		}
	}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(sbin(cmd)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", cmd, err, out)
		}
		table := ""
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "*") {
				table = line[1:]
			}
			if strings.HasPrefix(line, ":") {
				s.chains = append(s.chains, cmd+" "+table+" "+strings.Fields(line[1:])[0])
			}
		}
	}
	if out, err := exec.Command(sbin("nft"), "list", "tables").CombinedOutput(); err == nil {
		s.nftTables = strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	s.cniResults = dirNames("/var/lib/cni/results")
	for _, d := range []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods"} {
		if _, err := os.Stat(d); err == nil {
			s.hostDirs = append(s.hostDirs, d)
		}
	}
	s.sysctls = map[string]string{}
	for _, k := range []string{"net/ipv4/ip_forward", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
		"kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/conf/all/route_localnet"} {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			s.sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	return s
}

func sbin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return "/usr/sbin/" + name
}

func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// added returns the elements of after that are not in before and match.
func added(before, after []string, match func(string) bool) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) && match(a) {
			out = append(out, a)
		}
	}
	return out
}

// checkNothingLeft looks for anything of the node (state dir stateDir) left
// on the machine after its teardown.
func checkNothingLeft(t *testing.T, before hostState, stateDir string) {
	t.Helper()
	after := snapshotHost(t)
	check := func(what string, left []string) {
		t.Helper()
		if len(left) > 0 {
			t.Errorf("%s left by the node: %v", what, left)
		}
	}
	// The node's sandboxes, by id, as its containerd knew them.
	ids := dirNames(filepath.Join(stateDir, "containerd", "state", "io.containerd.grpc.v1.cri", "sandboxes"))
	check("links", added(before.links, after.links, func(l string) bool {
		return l == realnode.BridgeName || strings.HasPrefix(l, "veth")
	}))
	check("network namespaces", added(before.netns, after.netns, func(n string) bool { return strings.HasPrefix(n, "cni-") }))
	check("mounts", added(before.mounts, after.mounts, func(m string) bool {
		return strings.HasPrefix(m, stateDir+"/") || strings.HasPrefix(m, "/run/netns/")
	}))
	check("iptables chains", added(before.chains, after.chains, func(c string) bool {
		name := c[strings.LastIndexByte(c, ' ')+1:]
		return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-")
	}))
	check("nftables tables", added(before.nftTables, after.nftTables, func(string) bool { return true }))
	check("CNI results", added(before.cniResults, after.cniResults, func(r string) bool {
		return strings.HasPrefix(r, "mysqlha-realnode-") || slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(r, id) })
	}))
	check("host directories", added(before.hostDirs, after.hostDirs, func(string) bool { return true }))
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/mysqlha-realnode")
	check("cgroups", cgroups)
	sockets, _ := filepath.Glob("/run/containerd/s/*")
	check("shim sockets", added(nil, sockets, func(p string) bool {
		return slices.ContainsFunc(ids, func(id string) bool {
			sum := sha256.Sum256([]byte(filepath.Join(stateDir, "containerd", "containerd.sock", "k8s.io", id)))
			return filepath.Base(p) == hex.EncodeToString(sum[:])
		})
	}))
	for k, v := range before.sysctls {
		if after.sysctls[k] != v {
			t.Errorf("sysctl %s: %s before, %s after", k, v, after.sysctls[k])
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), stateDir) {
			t.Errorf("process %s still runs: %s", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// TestMissingRequirementNamesTheFix: without the Kubernetes binaries, Start
// fails, naming them and `make kube-bin`.
func TestMissingRequirementNamesTheFix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	t.Setenv("KUBE_BIN_DIR", dir)
	err := realnode.CheckRequirements()
	if err == nil {
		t.Fatal("CheckRequirements succeeded without the Kubernetes binaries")
	}
	for _, want := range []string{filepath.Join(dir, "kubelet"), filepath.Join(dir, "kube-proxy"), "make kube-bin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := realnode.Launch(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "make kube-bin") {
		t.Errorf("Launch without the binaries: %v, want the missing requirements", err)
	}
}
