package realnode

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// removeHostFiles removes what the components wrote outside the state dir:
// libcni's cached results of the node's network, containerd's shim sockets
// for the node's containers, the kubelet's /var/log/containers links into
// the state dir, and the host directories that did not exist before the
// node (rec.Created), if they are empty then, or are the kubelet's own.
func removeHostFiles(rec *record) error {
	var errs []error
	rm := func(p string) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// The containers and sandboxes of the node, as containerd's state
	// dir knows them.
	state := filepath.Join(rec.Dir, "containerd", "state")
	var ids []string
	for _, d := range []string{"io.containerd.runtime.v2.task/k8s.io", "io.containerd.grpc.v1.cri/sandboxes"} {
		ents, _ := os.ReadDir(filepath.Join(state, d))
		for _, e := range ents {
			ids = append(ids, e.Name())
		}
	}
	// libcni caches each ADD in /var/lib/cni/results/<network>-<sandbox
	// id>-<interface>: the node's network and containerd's own
	// "cni-loopback" for lo.
	results, _ := filepath.Glob("/var/lib/cni/results/" + networkName + "-*")
	for _, id := range ids {
		lo, _ := filepath.Glob("/var/lib/cni/results/*-" + id + "-*")
		results = append(results, lo...)
	}
	for _, p := range results {
		rm(p)
	}
	// containerd 1.6 puts a shim's socket at /run/containerd/s/<hex of
	// sha256(<containerd address>/<namespace>/<id>)>, the id being the
	// sandbox's for all containers of a pod.
	address := layout{dir: rec.Dir}.containerdSocket()
	for _, id := range ids {
		sum := sha256.Sum256([]byte(filepath.Join(address, "k8s.io", id)))
		rm(fmt.Sprintf("/run/containerd/s/%x", sum))
	}
	links, _ := os.ReadDir("/var/log/containers")
	for _, e := range links {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, rec.Dir+"/") {
			rm(p)
		}
	}
	for _, d := range rec.Created {
		if d == "/var/lib/kubelet" {
			// Only the kubelet uses it, and it did not exist before: the
			// device-plugin and pod-resources sockets and checkpoints.
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := removeEmptyDirs(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeEmptyDirs removes dir and its subdirectories, deepest first, as
// far as they hold nothing but empty directories; it is not an error that
// one holds something else (another program's). Mount points are left.
func removeEmptyDirs(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	mounted := map[string]bool{}
	mounts, _ := readMountinfo()
	for _, m := range mounts {
		mounted[m.point] = true
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if mounted[dirs[i]] {
			continue
		}
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOTEMPTY) &&
			!errors.Is(err, syscall.EEXIST) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("removing %s: %w", dirs[i], err)
		}
	}
	return nil
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
