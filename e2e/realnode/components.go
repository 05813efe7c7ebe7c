package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

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

// RestartControllers replaces the controller manager and the scheduler
// with new ones, as a restart of a control-plane node does. After the API
// server was down, the old controller manager's informers re-establish
// their watches with backoff and lag tens of seconds behind (endpoints of a
// Service included), which the next scenario would otherwise measure as
// its own; and the old scheduler was seen to leave a new pod unscheduled
// for minutes ("Scheduler cache is corrupted" after a forced deletion).
// kube-proxy too: its stale watches left the pods' ClusterIP of the API
// server (default/kubernetes) refusing connections for 40 s into the next
// scenario, so that no agent could reach its DCS; it returns once the API
// server answers through that ClusterIP again.
func (n *Node) RestartControllers() error {
	if n.cm != nil {
		n.cm.Stop()
	}
	if err := n.startControllerManager(); err != nil {
		return err
	}
	if n.scheduler != nil {
		n.scheduler.kill()
	}
	if err := n.startScheduler(); err != nil {
		return err
	}
	if n.proxy != nil {
		n.proxy.kill()
	}
	if err := n.startProxy(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return n.waitServiceNetwork(ctx)
}

// StopControllers stops the controller manager and the scheduler, as a
// control-plane node going down does (with the API server, stopped on its
// own); RestartControllers starts them again.
func (n *Node) StopControllers() {
	if n.cm != nil {
		n.cm.Stop()
		n.cm = nil
	}
	if n.scheduler != nil {
		n.scheduler.kill()
		n.scheduler = nil
	}
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
