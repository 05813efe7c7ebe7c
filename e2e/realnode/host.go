package realnode

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

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
