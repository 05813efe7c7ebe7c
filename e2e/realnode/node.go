package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mysqlha/mysqlha/dcs/kubernetes/kubetest"
	"github.com/mysqlha/mysqlha/internal/localproc"
)

const (
	// NodeName is the name of the node (kubelet --hostname-override).
	NodeName = "mysqlha-node"
	// BridgeName is the Linux bridge the node creates for its pods.
	BridgeName = "mysqlhabr0"
	// NodeIP is the bridge's address: the node's InternalIP, the pods'
	// gateway, and the address the apiserver binds and advertises.
	NodeIP = "198.18.10.1"
	// PodCIDR is the pods' subnet on the bridge (CNI host-local).
	PodCIDR = "198.18.10.0/24"
	// ServiceCIDR is the apiserver's --service-cluster-ip-range; kube-proxy
	// makes its ClusterIPs work on the host and in pods.
	ServiceCIDR = "198.19.0.0/20"
	// KubernetesServiceIP is the ClusterIP of default/kubernetes, the
	// KUBERNETES_SERVICE_HOST that pods get.
	KubernetesServiceIP = "198.19.0.1"

	// networkName is the CNI network; libcni caches results in
	// /var/lib/cni/results/<networkName>-<container>-<if>.
	networkName = "mysqlha-realnode"
	// cgroupRoot is the kubelet's cgroupRoot, a top-level cgroup in every
	// hierarchy that holds all pods and nothing else.
	cgroupRoot = "mysqlha-realnode"

	// DefaultStartTimeout bounds Start (a cold start builds the pause image
	// and starts everything in about 10 s).
	DefaultStartTimeout = 3 * time.Minute
)

// Controllers are the kube-controller-manager controllers of the node: what
// Deployments, StatefulSets, PodDisruptionBudgets, Services and namespaces
// need, ServiceAccounts with tokens (and kube-root-ca.crt, which projected
// token volumes mount), node lifecycle (it lifts the not-ready taint) and
// PersistentVolumeClaim binding.
var Controllers = []string{
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"job-controller",
	"disruption-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"pod-garbage-collector-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"service-cidr-controller",
}

// Option configures Start and Launch.
type Option func(*options)

type options struct {
	logf   func(format string, args ...any)
	binDir string
}

// WithLogf receives progress lines (phases and their durations). Start
// passes tb.Logf unless this option is given.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) { o.logf = logf }
}

// WithBinDir runs the Kubernetes binaries from dir instead of
// kubetest.BinDir().
func WithBinDir(dir string) Option {
	return func(o *options) { o.binDir = dir }
}

// Node is a running single-node Kubernetes cluster.
type Node struct {
	l      layout
	binDir string
	logf   func(string, ...any)

	lock *machineLock
	rec  *record

	api        *kubetest.APIServer
	cm         *kubetest.ControllerManager
	containerd *process
	kubelet    *process
	proxy      *process
	scheduler  *process
	client     kubernetes.Interface

	closeOnce sync.Once
	closeErr  error
}

// Start launches a node in tb.TempDir() (see Launch), failing tb with the
// reason and the components' log tails if it does not come up. It waits for
// another process's node as long as the test's deadline allows. tb.Cleanup tears it down, logging the log
// tails first if the test failed, and fails the test if anything of the node
// could not be removed.
func Start(tb testing.TB, opts ...Option) *Node {
	tb.Helper()
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			ctx, cancel = context.WithDeadline(ctx, deadline)
		}
	}
	defer cancel()
	n, err := Launch(ctx, tb.TempDir(), append([]Option{WithLogf(tb.Logf)}, opts...)...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			var b strings.Builder
			n.DumpLogs(&b, 40)
			tb.Logf("realnode: component logs:\n%s", b.String())
		}
		if err := n.Close(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return n
}

// Launch brings up the node with its state in dir (created if missing):
// etcd (in-process) and kube-apiserver (package kubetest), the controller
// manager, kube-scheduler, containerd, kubelet and kube-proxy as child
// processes, on BridgeName. It returns when the node is Ready without
// taints, the default ServiceAccount of namespace default exists, and the
// apiserver answers through KubernetesServiceIP from the host (so
// default/kubernetes names NodeIP and kube-proxy's rules are in place).
//
// Only one node runs per machine: Launch waits for a node of another
// process to close (or ctx to end); from then on, DefaultStartTimeout
// bounds the start as well as ctx. It first undoes a node left behind by
// a process that died without Close. If it fails half-way it undoes
// everything it did; the error holds the components' log tails. The caller
// owns the node: Close tears it down; dir is left in place.
func Launch(ctx context.Context, dir string, opts ...Option) (_ *Node, err error) {
	o := options{logf: func(string, ...any) {}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.binDir == "" {
		if o.binDir, err = kubetest.BinDir(); err != nil {
			return nil, fmt.Errorf("realnode: %w", err)
		}
	}
	if err := checkRequirements(requirements(o.binDir)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	if dir, err = filepath.Abs(dir); err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	l := layout{dir: dir}
	// A unix socket path has at most 107 bytes.
	if len(l.containerdSocket()+".ttrpc") > 107 {
		return nil, fmt.Errorf("realnode: state dir %s is too long for containerd's socket paths (107 bytes)", dir)
	}

	lock, err := acquireMachineLock(ctx, o.logf)
	if err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	// The wait for the machine may be long (another package's node); the
	// start itself is bounded.
	ctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	began := time.Now()
	n := &Node{l: l, binDir: o.binDir, logf: o.logf, lock: lock}
	defer func() {
		if err != nil {
			var b strings.Builder
			n.DumpLogs(&b, 30)
			err = fmt.Errorf("realnode: %w\n%s", err, b.String())
			if cerr := n.Close(); cerr != nil {
				err = fmt.Errorf("%w\nteardown after the failed start: %v", err, cerr)
			}
		}
	}()

	if err := undoStale(ctx, o.logf); err != nil {
		return nil, err
	}
	n.rec = &record{Dir: dir, PID: os.Getpid(), Sysctls: readSysctls(), Created: missingHostDirs(), NftTables: nftTables(ctx)}
	if err := writeRecord(n.rec); err != nil {
		return nil, fmt.Errorf("writing %s: %w", recordPath, err)
	}
	if err := n.setupHost(ctx); err != nil {
		return nil, err
	}
	if err := n.writeConfigs(); err != nil {
		return nil, fmt.Errorf("writing configs: %w", err)
	}

	// The container runtime (with the pause image) and the control plane
	// start in parallel; the apiserver takes longest.
	runtimeDone := make(chan error, 1)
	go func() { runtimeDone <- n.startRuntime(ctx, began) }()
	if err := n.startAPIServer(); err != nil {
		<-runtimeDone
		return nil, err
	}
	o.logf("realnode: kube-apiserver ready at %s after %v", n.api.URL(), time.Since(began).Round(time.Millisecond))

	cmDone := make(chan error, 1)
	go func() { cmDone <- n.startControllerManager() }()
	startErr := n.startScheduler()
	if startErr == nil {
		startErr = n.startProxy()
	}
	runtimeErr := <-runtimeDone
	if startErr == nil && runtimeErr == nil {
		startErr = n.startKubelet()
	}
	cmErr := <-cmDone // before returning, so that Close sees n.cm
	if err := errors.Join(startErr, runtimeErr, cmErr); err != nil {
		return nil, err
	}
	o.logf("realnode: controller manager ready after %v", time.Since(began).Round(time.Millisecond))
	if err := n.waitNodeReady(ctx); err != nil {
		return nil, err
	}
	o.logf("realnode: node %s Ready after %v", NodeName, time.Since(began).Round(time.Millisecond))
	if err := n.waitServiceNetwork(ctx); err != nil {
		return nil, err
	}
	o.logf("realnode: node up after %v (apiserver reachable at %s:443)", time.Since(began).Round(time.Millisecond), KubernetesServiceIP)
	return n, nil
}

// UndoLeftovers undoes a node left behind by a process that died without
// Close (Launch does this too, first), after waiting, as Launch does, for a
// node of a live process to close. Tests that compare the machine before
// and after a node call it before looking.
func UndoLeftovers(ctx context.Context, logf func(format string, args ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	lock, err := acquireMachineLock(ctx, logf)
	if err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	defer lock.release()
	if err := undoStale(ctx, logf); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

// undoStale sweeps the node of recordPath, if any; the caller holds the
// machine lock.
func undoStale(ctx context.Context, logf func(string, ...any)) error {
	stale, err := readRecord()
	if err != nil || stale == nil {
		return err
	}
	t := time.Now()
	logf("realnode: undoing the node that pid %d left in %s", stale.PID, stale.Dir)
	if err := sweep(ctx, stale, nil); err != nil {
		return fmt.Errorf("undoing the node left in %s: %w", stale.Dir, err)
	}
	if err := os.Remove(recordPath); err != nil {
		return err
	}
	logf("realnode: old node undone in %v", time.Since(t).Round(time.Millisecond))
	return nil
}

// setupHost creates the bridge with NodeIP and a route for ServiceCIDR,
// the kubelet's cgroup root, and
// turns on IPv4 forwarding (ClusterIP traffic from a pod to a pod is DNATed
// on the node and routed back onto the bridge).
func (n *Node) setupHost(ctx context.Context) error {
	if _, err := run(ctx, "ip", "link", "add", BridgeName, "type", "bridge"); err != nil {
		return fmt.Errorf("creating bridge: %w", err)
	}
	if _, err := run(ctx, "ip", "addr", "add", NodeIP+"/24", "dev", BridgeName); err != nil {
		return fmt.Errorf("addressing bridge: %w", err)
	}
	if _, err := run(ctx, "ip", "link", "set", BridgeName, "up"); err != nil {
		return fmt.Errorf("bridge up: %w", err)
	}
	// The host's own connections to ClusterIPs leave from NodeIP onto the
	// bridge, not through the default route: before kube-proxy's DNAT, and
	// for a ClusterIP it has no rule for, nothing goes off the machine.
	if _, err := run(ctx, "ip", "route", "add", ServiceCIDR, "dev", BridgeName, "src", NodeIP); err != nil {
		return fmt.Errorf("route to the Service CIDR: %w", err)
	}
	if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	return createCgroupRoot()
}

func (n *Node) writeConfigs() error {
	l := n.l
	for _, d := range []string{l.logDir(), l.imageDir(), l.cniConfDir(), l.kubeletRootDir(), l.podLogsDir(),
		l.path("kubelet", "manifests"), l.path("kubelet", "certs"), l.path("kubelet", "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cni, err := cniConfig(l)
	if err != nil {
		return err
	}
	// No cluster DNS runs: pods resolve nothing (dnsPolicy ClusterFirst
	// falls back to this file, with the kubelet's MissingClusterDNS event).
	files := map[string][]byte{
		l.path("containerd", "config.toml"):                  []byte(containerdConfig(l)),
		filepath.Join(l.cniConfDir(), "10-mysqlha.conflist"): cni,
		l.path("resolv.conf"):                                []byte("# realnode: no DNS server; use IPs\noptions ndots:1\n"),
	}
	for path, data := range files {
		if err := writeFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startRuntime builds the pause image, starts containerd and imports it.
func (n *Node) startRuntime(ctx context.Context, began time.Time) error {
	archive := filepath.Join(n.l.imageDir(), "pause.tar")
	if err := writePauseImage(ctx, n.l.path("build"), archive); err != nil {
		return err
	}
	bin, err := lookPath("containerd")
	if err != nil {
		return err
	}
	n.containerd, err = startProcess("containerd", bin, []string{"--config", n.l.path("containerd", "config.toml")},
		filepath.Join(n.l.logDir(), "containerd.log"))
	if err != nil {
		return err
	}
	err = waitUntil(ctx, "containerd's socket", 50*time.Millisecond, func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", n.l.containerdSocket())
		if err == nil {
			c.Close()
		}
		return err
	}, n.containerd)
	if err != nil {
		return err
	}
	if err := n.ImportImage(ctx, archive); err != nil {
		return err
	}
	n.logf("realnode: containerd up with %s after %v", PauseImage, time.Since(began).Round(time.Millisecond))
	return nil
}

// Token users of the node's components; RBAC's bootstrap policy binds the
// last two, the Node authorizer serves the kubelet.
var (
	kubeletUser   = "system:node:" + NodeName
	proxyUser     = "system:kube-proxy"
	schedulerUser = "system:kube-scheduler"
)

func (n *Node) startAPIServer() error {
	var err error
	n.api, err = kubetest.Launch(n.l.apiserverDir(),
		kubetest.WithBinDir(n.binDir),
		kubetest.WithBindAddress(NodeIP),
		kubetest.WithAdvertiseAddress(NodeIP),
		kubetest.WithServiceClusterIPRange(ServiceCIDR),
		kubetest.WithEndpointReconciler(),
		kubetest.WithServiceAccountAdmission(),
		kubetest.WithNodeAuthorization(),
		kubetest.WithKubeletClientCert(),
		kubetest.WithTokenUser(kubeletUser, "system:nodes"),
		kubetest.WithTokenUser(proxyUser),
		kubetest.WithTokenUser(schedulerUser),
		kubetest.WithAPIServerArgs("--allow-privileged=true"),
	)
	if err != nil {
		return err
	}
	n.client, err = kubernetes.NewForConfig(n.api.Config())
	return err
}

func (n *Node) startControllerManager() error {
	var err error
	n.cm, err = n.api.LaunchControllerManager(
		kubetest.WithControllers(Controllers...),
		// The not-ready taint is lifted within a monitor period of the
		// node turning Ready (default 5 s).
		kubetest.WithControllerManagerArgs("--node-monitor-period=1s"),
	)
	return err
}

func (n *Node) startScheduler() error {
	kc := n.l.path("kube-scheduler.kubeconfig")
	if err := n.api.SaveUserKubeconfig(kc, schedulerUser, ""); err != nil {
		return err
	}
	var err error
	n.scheduler, err = startProcess("kube-scheduler", filepath.Join(n.binDir, "kube-scheduler"), []string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--secure-port=0",
	}, filepath.Join(n.l.logDir(), "kube-scheduler.log"))
	return err
}

func (n *Node) startProxy() error {
	kc := n.l.path("kube-proxy.kubeconfig")
	if err := n.api.SaveUserKubeconfig(kc, proxyUser, ""); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cfg, err := kubeProxyConfig(kc, ports[0], ports[1])
	if err != nil {
		return err
	}
	path := n.l.path("kube-proxy.json")
	if err := writeFile(path, cfg, 0o644); err != nil {
		return err
	}
	n.proxy, err = startProcess("kube-proxy", filepath.Join(n.binDir, "kube-proxy"), []string{"--config=" + path, "--v=1"},
		filepath.Join(n.l.logDir(), "kube-proxy.log"))
	return err
}

func (n *Node) startKubelet() error {
	kc := n.l.path("kubelet", "kubeconfig")
	if err := n.api.SaveUserKubeconfig(kc, kubeletUser, ""); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cfg, err := kubeletConfig(n.l, n.api.CAFile(), ports[0], ports[1])
	if err != nil {
		return err
	}
	path := n.l.path("kubelet", "config.json")
	if err := writeFile(path, cfg, 0o644); err != nil {
		return err
	}
	n.kubelet, err = startProcess("kubelet", filepath.Join(n.binDir, "kubelet"), []string{
		"--config=" + path,
		"--kubeconfig=" + kc,
		"--root-dir=" + n.l.kubeletRootDir(),
		"--cert-dir=" + n.l.path("kubelet", "certs"),
		"--hostname-override=" + NodeName,
		"--node-ip=" + NodeIP,
		"--v=1",
	}, filepath.Join(n.l.logDir(), "kubelet.log"))
	return err
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitNodeReady waits until the Node is Ready and has no taint left by the
// node lifecycle (not-ready, unreachable).
func (n *Node) waitNodeReady(ctx context.Context) error {
	return waitUntil(ctx, "node "+NodeName+" Ready without taints", 100*time.Millisecond, func(ctx context.Context) error {
		node, err := n.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					return fmt.Errorf("condition Ready=%s: %s", c.Status, c.Message)
				}
				ready = true
			}
		}
		if !ready {
			return errors.New("no Ready condition yet")
		}
		if len(node.Spec.Taints) > 0 {
			return fmt.Errorf("taints %v", node.Spec.Taints)
		}
		return nil
	}, n.kubelet, n.containerd)
}

// waitServiceNetwork waits until default/kubernetes's EndpointSlice names
// NodeIP and the apiserver answers /readyz at KubernetesServiceIP:443 from
// the host, which takes kube-proxy's rules.
func (n *Node) waitServiceNetwork(ctx context.Context) error {
	err := waitUntil(ctx, "default/kubernetes endpoints at "+NodeIP, 100*time.Millisecond, func(ctx context.Context) error {
		eps, err := n.client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ep := range eps.Endpoints {
			for _, a := range ep.Addresses {
				if a == NodeIP {
					return nil
				}
			}
		}
		return fmt.Errorf("EndpointSlice default/kubernetes: %v", eps.Endpoints)
	})
	if err != nil {
		return err
	}
	cfg := n.Config()
	cfg.Host = "https://" + net.JoinHostPort(KubernetesServiceIP, "443")
	// Short: until kube-proxy has written its rules, a SYN to the
	// ClusterIP goes onto the bridge and is never answered.
	cfg.Timeout = 500 * time.Millisecond
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return waitUntil(ctx, "the apiserver through "+cfg.Host+" (kube-proxy)", 100*time.Millisecond, func(ctx context.Context) error {
		_, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}, n.proxy)
}

// CreateNamespace creates a namespace and waits until it is ready for
// pods: its default ServiceAccount exists (ServiceAccount admission refuses
// pods before) and so does the kube-root-ca.crt ConfigMap (projected token
// volumes mount it).
func (n *Node) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := n.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("realnode: creating namespace %s: %w", name, err)
	}
	err := waitUntil(ctx, "namespace "+name+" ready for pods", 50*time.Millisecond, func(ctx context.Context) error {
		if _, err := n.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := n.client.CoreV1().ConfigMaps(name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

// Config returns a new admin (system:masters) client configuration for the
// apiserver at NodeIP.
func (n *Node) Config() *rest.Config { return n.api.Config() }

// Client returns an admin clientset.
func (n *Node) Client() kubernetes.Interface { return n.client }

// APIServer returns the node's apiserver (kubetest), e.g. for its token
// users or its Etcd.
func (n *Node) APIServer() *kubetest.APIServer { return n.api }

// WriteKubeconfig writes an admin kubeconfig (mode 0600, CA embedded) to
// path, e.g. for kubectl.
func (n *Node) WriteKubeconfig(path string) error { return n.api.SaveKubeconfig(path, "") }

// NodeName returns the node's name, NodeName.
func (n *Node) NodeName() string { return NodeName }

// NodeIP returns the node's InternalIP, NodeIP.
func (n *Node) NodeIP() string { return NodeIP }

// Dir returns the state directory.
func (n *Node) Dir() string { return n.l.dir }

// LogDir returns the directory of the components' logs (containerd.log,
// kubelet.log, kube-proxy.log, kube-scheduler.log); the apiserver's and the
// controller manager's are in APIServer().Dir(). LogFiles lists them all.
func (n *Node) LogDir() string { return n.l.logDir() }

// PodLogsDir returns the kubelet's podLogsDir, where containers' stdout and
// stderr are kept (<namespace>_<pod>_<uid>/<container>/<n>.log).
func (n *Node) PodLogsDir() string { return n.l.podLogsDir() }

// ContainerdSocket returns the path of containerd's socket, for
// `ctr --address`.
func (n *Node) ContainerdSocket() string { return n.l.containerdSocket() }

// LogFiles returns the paths of all components' logs.
func (n *Node) LogFiles() []string {
	files := []string{
		filepath.Join(n.l.apiserverDir(), "kube-apiserver.log"),
		filepath.Join(n.l.apiserverDir(), "kube-controller-manager.log"),
		filepath.Join(n.l.apiserverDir(), "etcd", "etcd.log"),
	}
	for _, c := range []string{"containerd", "kube-scheduler", "kubelet", "kube-proxy"} {
		files = append(files, filepath.Join(n.l.logDir(), c+".log"))
	}
	return files
}

// DumpLogs writes the last lines of every component's log to w.
func (n *Node) DumpLogs(w io.Writer, lines int) {
	for _, f := range n.LogFiles() {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		fmt.Fprintf(w, "--- last %d lines of %s:\n%s\n", lines, f, localproc.Tail(f, lines))
	}
}

// ImportImage loads an image archive (Docker or OCI format, e.g. from
// WriteImageArchive or BuildGoImage) into containerd's k8s.io namespace,
// where the kubelet finds it; pods use it with imagePullPolicy: Never.
//
// It returns once the CRI plugin has taken the images in (it labels them
// io.cri-containerd.image=managed as it processes containerd's events):
// a pod created before that fails with ErrImageNeverPull and waits out the
// kubelet's back-off.
func (n *Node) ImportImage(ctx context.Context, archivePath string) error {
	out, err := n.ctr(ctx, "images", "import", archivePath)
	if err != nil {
		return fmt.Errorf("realnode: importing %s: %w", archivePath, err)
	}
	// "unpacking localhost/mysqlha/pause:1 (sha256:...)...done"
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "unpacking" {
			names = append(names, f[1])
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("realnode: importing %s: no image named in ctr's output: %s", archivePath, out)
	}
	for _, name := range names {
		err := waitUntil(ctx, "the CRI plugin to take in "+name, 20*time.Millisecond, func(ctx context.Context) error {
			ls, err := n.ctr(ctx, "images", "ls", "name=="+name)
			if err == nil && !strings.Contains(ls, "io.cri-containerd.image=managed") {
				err = errors.New("not labelled io.cri-containerd.image=managed yet")
			}
			return err
		}, n.containerd)
		if err != nil {
			return fmt.Errorf("realnode: importing %s: %w", archivePath, err)
		}
	}
	return nil
}

// ctr runs ctr against the node's containerd in the k8s.io namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "ctr", append([]string{"--address", n.l.containerdSocket(), "-n", "k8s.io"}, args...)...)
}

// Close tears the node down: every process it started, the pods'
// containers and shims, mounts under the state dir, the pods' network
// namespaces and veths, the bridge, kube-proxy's and CNI's iptables chains,
// the cgroup root, the files the components left outside the state dir,
// and the sysctls the components changed. It is idempotent, returns what
// it could not undo, and releases the machine for the next node.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		t := time.Now()
		n.closeErr = n.teardown()
		if n.closeErr != nil {
			n.closeErr = fmt.Errorf("realnode: teardown: %w", n.closeErr)
		}
		n.logf("realnode: torn down in %v", time.Since(t).Round(time.Millisecond))
	})
	return n.closeErr
}

func (n *Node) teardown() error {
	defer n.lock.release()
	if n.rec == nil {
		return nil // nothing was changed
	}
	// Control loops first, so that nothing restarts what is removed next.
	var wg sync.WaitGroup
	for _, p := range []*process{n.kubelet, n.proxy, n.scheduler} {
		if p != nil {
			wg.Go(p.kill)
		}
	}
	if n.cm != nil {
		wg.Go(n.cm.Kill)
	}
	wg.Wait()
	if n.api != nil {
		n.api.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The pods' network namespaces are told by their processes, so they
	// are found before those are killed.
	netns := podNetnses(ctx)
	if err := killCgroupProcesses(ctx); err != nil {
		return err
	}
	if n.containerd != nil {
		n.containerd.kill()
	}
	if err := sweep(ctx, n.rec, netns); err != nil {
		return err
	}
	return os.Remove(recordPath)
}

// hostDirs are the directories outside the state dir that the components
// write to whatever their configuration says (real-node-notes.md, pitfall
// 7), and the parents of what teardown removes there.
var hostDirs = []string{"/run/netns", "/var/lib/cni", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/run/containerd"}

func missingHostDirs() []string {
	var missing []string
	for _, d := range hostDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, d)
		}
	}
	return missing
}

// sysctls are those that the node or its components may change:
// ip_forward (the node), the kernel tunables the kubelet sets when
// protectKernelDefaults is false, and those kube-proxy would set were they
// not configured away. Teardown restores each that changed.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

func readSysctls() map[string]string {
	m := map[string]string{}
	for _, s := range sysctls {
		if b, err := os.ReadFile("/proc/sys/" + s); err == nil {
			m[s] = strings.TrimSpace(string(b))
		}
	}
	return m
}

func writeSysctl(name, value string) error {
	if err := os.WriteFile("/proc/sys/"+name, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting sysctl %s=%s: %w", strings.ReplaceAll(name, "/", "."), value, err)
	}
	return nil
}
