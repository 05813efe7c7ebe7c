package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/mysqlha/mysqlha/testenv/kubetest"
	"github.com/mysqlha/mysqlha/testenv/localproc"
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
