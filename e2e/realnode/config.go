package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// podRoute is the only route pods get besides their own subnet.
const podRoute = "198.18.0.0/15"

// layout names the files and directories of a node under its state dir.
type layout struct{ dir string }

func (l layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.dir}, elem...)...)
}

func (l layout) apiserverDir() string     { return l.path("apiserver") }
func (l layout) logDir() string           { return l.path("logs") }
func (l layout) containerdDir() string    { return l.path("containerd") }
func (l layout) containerdSocket() string { return l.path("containerd", "containerd.sock") }
func (l layout) cniConfDir() string       { return l.path("cni", "net.d") }
func (l layout) kubeletRootDir() string   { return l.path("kubelet", "root") }
func (l layout) podLogsDir() string       { return l.path("kubelet", "pod-logs") }
func (l layout) imageDir() string         { return l.path("images") }

// containerdConfig is containerd 1.6's config (version 2) with everything
// it writes under the state dir, the CRI plugin set up for the node: the
// pause image as sandbox image, CNI from /usr/lib/cni, cgroupfs, and
// restrict_oom_score_adj, because this machine's root lacks
// CAP_SYS_RESOURCE and runc would fail to give the sandbox an
// oom_score_adj below containerd's own ("can't get final child's PID from
// pipe: EOF").
func containerdConfig(l layout) string {
	d := l.containerdDir()
	q := strconv.Quote
	return fmt.Sprintf(`version = 2
root = %s
state = %s
oom_score = 0
# Snapshotters and plugins the node does not use: less to start and to fail.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %s

[ttrpc]
  address = %s

[debug]
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %s

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %s
  disable_apparmor = true
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %s
        Root = %s
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
    max_conf_num = 1
`,
		q(filepath.Join(d, "root")), q(filepath.Join(d, "state")),
		q(l.containerdSocket()), q(l.containerdSocket()+".ttrpc"),
		q(filepath.Join(d, "opt")),
		q(PauseImage), q(mustLookPath("runc")), q(filepath.Join(d, "runc")),
		q(cniDir), q(l.cniConfDir()))
}

func mustLookPath(name string) string {
	if p, err := lookPath(name); err == nil {
		return p
	}
	return name
}

// cniConfig is the pod network: the bridge plugin on BridgeName, which Start
// has created with NodeIP (the plugin accepts an existing bridge), and IPs
// from PodCIDR by host-local, its state under the state dir. Pods get a
// route to 198.18.0.0/15 (pods, the node, ClusterIPs) through the bridge and
// no default route, and no ipMasq: no pod can send anything off the machine
// even though the node turns on ip_forward. portmap serves hostPort.
func cniConfig(l layout) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       networkName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": NodeIP}}},
					"routes":  []map[string]string{{"dst": podRoute}},
					"dataDir": l.path("cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
}

// kubeletConfig is the KubeletConfiguration (JSON is YAML). Beyond
// real-node-notes.md: cgroupRoot names the node's own cgroup tree (teardown
// removes exactly that), oomScoreAdj 0 (the machine lacks CAP_SYS_RESOURCE
// for -999), x509 client authentication only (no anonymous access to a
// kubelet port that pods can reach), free ports, and kernel tunables left to
// teardown's sysctl restore.
func kubeletConfig(l layout, caFile string, port, healthzPort int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"apiVersion":                    "kubelet.config.k8s.io/v1beta1",
		"kind":                          "KubeletConfiguration",
		"failCgroupV1":                  false,
		"cgroupDriver":                  "cgroupfs",
		"cgroupRoot":                    "/" + cgroupRoot,
		"cgroupsPerQOS":                 true,
		"containerRuntimeEndpoint":      "unix://" + l.containerdSocket(),
		"imageServiceEndpoint":          "unix://" + l.containerdSocket(),
		"address":                       NodeIP,
		"port":                          port,
		"readOnlyPort":                  0,
		"healthzBindAddress":            "127.0.0.1",
		"healthzPort":                   healthzPort,
		"tlsCertFile":                   "",
		"rotateCertificates":            false,
		"serverTLSBootstrap":            false,
		"authentication":                map[string]any{"anonymous": map[string]bool{"enabled": false}, "webhook": map[string]bool{"enabled": false}, "x509": map[string]string{"clientCAFile": caFile}},
		"authorization":                 map[string]string{"mode": "AlwaysAllow"},
		"staticPodPath":                 l.path("kubelet", "manifests"),
		"resolvConf":                    l.path("resolv.conf"),
		"failSwapOn":                    false,
		"enforceNodeAllocatable":        []string{},
		"registerNode":                  true,
		"serializeImagePulls":           false,
		"oomScoreAdj":                   0,
		"protectKernelDefaults":         false,
		"evictionHard":                  map[string]string{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"imageGCHighThresholdPercent":   99,
		"imageGCLowThresholdPercent":    98,
		"localStorageCapacityIsolation": true,
		"podLogsDir":                    l.podLogsDir(),
		"volumePluginDir":               l.path("kubelet", "volume-plugins"),
		"nodeStatusUpdateFrequency":     "2s",
		"nodeStatusReportFrequency":     "10s",
		"syncFrequency":                 "10s",
		"fileCheckFrequency":            "20s",
		"shutdownGracePeriod":           "0s",
		"maxPods":                       110,
	}, "", "  ")
}

// kubeProxyConfig is the KubeProxyConfiguration: iptables mode for
// PodCIDR, with every conntrack sysctl left alone (maxPerCore 0 and zero
// timeouts mean "do not set"; the writes may fail in this machine's
// network namespace), no route_localnet (localhostNodePorts false), its own
// oom_score_adj left alone, NodePorts only on the bridge, and syncs as soon
// as a Service or EndpointSlice changes.
func kubeProxyConfig(kubeconfig string, healthzPort, metricsPort int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig, "qps": 50, "burst": 100},
		"mode":               "iptables",
		"clusterCIDR":        PodCIDR,
		"hostnameOverride":   NodeName,
		"bindAddress":        NodeIP,
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(healthzPort),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(metricsPort),
		"oomScoreAdj":        0,
		"nodePortAddresses":  []string{PodCIDR},
		"conntrack": map[string]any{
			"maxPerCore":            0,
			"min":                   0,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
			"udpTimeout":            "0s",
			"udpStreamTimeout":      "0s",
		},
		"iptables": map[string]any{
			"localhostNodePorts": false,
			"masqueradeAll":      false,
			"syncPeriod":         "30s",
			"minSyncPeriod":      "0s",
		},
	}, "", "  ")
}

// writeFile writes data to path, creating its directory.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, mode)
}
