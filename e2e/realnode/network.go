package realnode

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const netnsDir = "/run/netns"

// netnsInodes maps the inode of each named network namespace to its name.
func netnsInodes() map[uint64]string {
	m := map[uint64]string{}
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(netnsDir, e.Name()), &st) == nil {
			m[st.Ino] = e.Name()
		}
	}
	return m
}

// netnsOfPID returns the inode of a process's network namespace.
func netnsOfPID(pid int) (uint64, bool) {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return 0, false
	}
	// net:[4026532281]
	ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]"), 10, 64)
	return ino, err == nil
}

// podNetnses returns the names of the network namespaces in /run/netns that
// processes in the node's cgroups are in.
func podNetnses(context.Context) []string {
	byIno := netnsInodes()
	seen := map[string]bool{}
	var out []string
	for _, pid := range cgroupPIDs() {
		if ino, ok := netnsOfPID(pid); ok {
			if name, ok := byIno[ino]; ok && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// bridgeNetnses returns the names of the network namespaces that hold the
// other end of a veth on BridgeName (`ip` prints "link-netns NAME").
func bridgeNetnses(ctx context.Context) []string {
	out, err := run(ctx, "ip", "-o", "link", "show", "master", BridgeName)
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "link-netns" {
				names = append(names, f[i+1])
			}
		}
	}
	return names
}

// removeNetnses unmounts and removes the named network namespaces (only
// cni-* names, those containerd's CRI plugin makes), and /run/netns itself
// if it is then empty and not a mount point.
func removeNetnses(names []string) error {
	var errs []error
	done := map[string]bool{}
	for _, name := range names {
		if done[name] || !strings.HasPrefix(name, "cni-") || strings.Contains(name, "/") {
			continue
		}
		done[name] = true
		p := filepath.Join(netnsDir, name)
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLinks deletes the veths on the bridge, then the bridge.
func removeLinks(ctx context.Context) error {
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err != nil {
		return nil
	}
	var errs []error
	ents, _ := os.ReadDir("/sys/class/net/" + BridgeName + "/brif")
	for _, e := range ents {
		if _, err := run(ctx, "ip", "link", "del", e.Name()); err != nil {
			if _, serr := os.Stat("/sys/class/net/" + e.Name()); serr == nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := run(ctx, "ip", "link", "del", BridgeName); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
