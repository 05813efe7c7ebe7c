package realnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// Requirement is one thing the node needs from the machine.
type Requirement struct {
	// What is a binary name (looked up in PATH and the sbin directories), an
	// absolute path, or a description of a machine property.
	What string
	// Fix says how to get it: a Debian package ("apt-get install PKG"), a
	// make target, or what to change.
	Fix string
	// Why says which part of the node uses it.
	Why string

	check func() error
}

// cniDir is where Debian's containernetworking-plugins installs the plugins.
const cniDir = "/usr/lib/cni"

// Requirements lists what Start needs besides this module: Debian packages
// (`make node-packages` installs them), the Kubernetes binaries of
// `make kube-bin`, the go command, root, and kernel features.
func Requirements() []Requirement {
	binDir, err := kubetest.BinDir()
	if err != nil {
		binDir = filepath.Join("bin", "k8s-"+kubetest.KubernetesVersion)
	}
	return requirements(binDir)
}

// requirements are the Requirements with the Kubernetes binaries in binDir.
func requirements(binDir string) []Requirement {
	pkg := func(bin, deb, why string) Requirement {
		return Requirement{What: bin, Fix: "apt-get install -y " + deb + " (or make node-packages)", Why: why,
			check: func() error { _, err := lookPath(bin); return err }}
	}
	file := func(path, fix, why string) Requirement {
		return Requirement{What: path, Fix: fix, Why: why, check: func() error {
			st, err := os.Stat(path)
			if err == nil && !st.IsDir() && st.Mode()&0o111 == 0 {
				err = fmt.Errorf("%s is not executable", path)
			}
			return err
		}}
	}
	reqs := []Requirement{
		{What: "root (uid 0)", Fix: "run the tests as root", Why: "bridge, netns, mounts, iptables, cgroups",
			check: func() error {
				if os.Geteuid() != 0 {
					return fmt.Errorf("euid is %d", os.Geteuid())
				}
				return nil
			}},
		pkg("containerd", "containerd", "the container runtime (CRI plugin)"),
		pkg("containerd-shim-runc-v2", "containerd", "runs each pod's containers"),
		pkg("ctr", "containerd", "ImportImage"),
		pkg("runc", "runc", "the OCI runtime"),
		file(filepath.Join(cniDir, "bridge"), "apt-get install -y containernetworking-plugins", "pod network"),
		file(filepath.Join(cniDir, "host-local"), "apt-get install -y containernetworking-plugins", "pod IPs"),
		file(filepath.Join(cniDir, "loopback"), "apt-get install -y containernetworking-plugins", "pods' lo"),
		file(filepath.Join(cniDir, "portmap"), "apt-get install -y containernetworking-plugins", "hostPort"),
		pkg("iptables", "iptables", "kube-proxy, fault injection"),
		pkg("iptables-save", "iptables", "teardown of KUBE-* and CNI-* chains"),
		pkg("iptables-restore", "iptables", "kube-proxy, teardown"),
		pkg("ip6tables", "iptables", "kube-proxy (IPv6 canaries)"),
		pkg("ip", "iproute2", "bridge, veths, netns"),
		pkg("mount", "mount", "kubelet volumes"),
		{What: "go", Fix: "install Go and put it in PATH", Why: "builds the pause image",
			check: func() error { _, err := lookPath("go"); return err }},
		{What: "cgroup v1 hierarchies in /sys/fs/cgroup", Fix: "a cgroup v1 or hybrid host (the kubelet config says failCgroupV1: false)",
			Why: "kubelet and runc", check: func() error {
				_, err := os.Stat("/sys/fs/cgroup/memory")
				return err
			}},
		{What: "/proc/sys/net/bridge (br_netfilter)", Fix: "modprobe br_netfilter on the host",
			Why: "kube-proxy rules for traffic between pods on the bridge", check: func() error {
				_, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables")
				return err
			}},
	}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		reqs = append(reqs, file(filepath.Join(binDir, name),
			"make kube-bin (builds k8s.io/kubernetes "+kubetest.KubernetesVersion+", ~10 min cold), or set KUBE_BIN_DIR", name))
	}
	return reqs
}

// CheckRequirements returns nil if every Requirement is met, or an error
// naming each missing one with its fix, the Debian packages in one apt-get
// line.
func CheckRequirements() error {
	return checkRequirements(Requirements())
}

func checkRequirements(reqs []Requirement) error {
	var missing []string
	debs := map[string]bool{}
	for _, r := range reqs {
		if err := r.check(); err != nil {
			missing = append(missing, fmt.Sprintf("  %s (%s): %v; fix: %s", r.What, r.Why, err, r.Fix))
			if deb, ok := strings.CutPrefix(r.Fix, "apt-get install -y "); ok {
				debs[strings.Fields(deb)[0]] = true
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := "realnode: the machine lacks what the node needs:\n" + strings.Join(missing, "\n")
	if len(debs) > 0 {
		var names []string
		for d := range debs {
			names = append(names, d)
		}
		sort.Strings(names)
		msg += "\ninstall the packages with: apt-get update && apt-get install -y " + strings.Join(names, " ")
	}
	return errors.New(msg)
}
