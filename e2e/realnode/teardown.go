package realnode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sweep undoes what a node (rec) left on the machine, whether its
// processes still run or not: it is both the end of Close and the recovery
// from a node whose process died. netns adds network namespaces known to be
// the node's (podNetnses, found while the pods still ran); the others are
// found by their veths on the bridge. It goes on after an error and returns
// them all.
func sweep(ctx context.Context, rec *record, netns []string) error {
	var errs []error
	add := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	// Pods' processes still running (after a crash) tell their netns.
	netns = append(netns, podNetnses(ctx)...)
	add("killing pod processes", killCgroupProcesses(ctx))
	// Every process of the node names the state dir on its command line:
	// the components by their flags, containerd's shims by -address.
	add("killing node processes", killByCmdline(ctx, rec.Dir))
	add("unmounting", unmountUnder(rec.Dir))
	netns = append(netns, bridgeNetnses(ctx)...)
	add("removing pod network namespaces", removeNetnses(netns))
	add("removing veths and bridge", removeLinks(ctx))
	for _, cmd := range []string{"iptables", "ip6tables"} {
		add("removing "+cmd+" chains", removeChains(ctx, cmd))
	}
	add("removing nftables tables", removeNewNftTables(ctx, rec.NftTables))
	add("removing cgroups", removeCgroupRoot(ctx))
	add("removing files outside the state dir", removeHostFiles(rec))
	for name, old := range rec.Sysctls {
		if b, err := os.ReadFile("/proc/sys/" + name); err == nil && strings.TrimSpace(string(b)) != old {
			add("restoring sysctl", writeSysctl(name, old))
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts returns the mount points of the cgroup hierarchies (v1 and
// the hybrid unified one).
func cgroupMounts() ([]string, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.point)
		}
	}
	return out, nil
}

// createCgroupRoot makes cgroupRoot in every hierarchy: the kubelet refuses
// a cgroupRoot that does not exist. A new cpuset cgroup starts with no CPUs
// and memory nodes, so it gets its parent's.
func createCgroupRoot() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		d := filepath.Join(m, cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("initialising %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// cgroupDirs returns the node's cgroups in every hierarchy, deepest first.
func cgroupDirs() []string {
	mounts, _ := cgroupMounts()
	var dirs []string
	for _, m := range mounts {
		_ = filepath.WalkDir(filepath.Join(m, cgroupRoot), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// cgroupPIDs returns the processes in the node's cgroups: the pods'.
func cgroupPIDs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range cgroupDirs() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// killCgroupProcesses SIGKILLs every process in the node's cgroups (the
// pods' containers, pause included) until none is left.
func killCgroupProcesses(ctx context.Context) error {
	return killUntilGone(ctx, "processes in cgroup "+cgroupRoot, cgroupPIDs)
}

// killByCmdline SIGKILLs every process (but this one) whose command line
// names a path under dir until none is left.
func killByCmdline(ctx context.Context, dir string) error {
	self := os.Getpid()
	under := []byte(dir + "/")
	return killUntilGone(ctx, "processes naming "+dir, func() []int {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err == nil && bytes.Contains(cmdline, under) && !isZombie(pid) {
				pids = append(pids, pid)
			}
		}
		return pids
	})
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone
	}
	// pid (comm) S ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}

func killUntilGone(ctx context.Context, what string, list func() []int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		var alive []int
		for _, pid := range list() {
			if !isZombie(pid) {
				alive = append(alive, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still alive: %v", what, alive)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type mount struct {
	point  string
	fstype string
}

// readMountinfo parses /proc/self/mountinfo, in mount order.
func readMountinfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		m := mount{point: unescapeMount(fields[4])}
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				m.fstype = fields[i+1]
				break
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder returns the mount points at or below dir, last mounted first.
func mountsUnder(dir string) []string {
	mounts, _ := readMountinfo()
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		p := mounts[i].point
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// unmountUnder unmounts everything at or below dir: overlay rootfs and shm
// of containers, the kubelet's volumes and its rshared root dir. A mount
// still busy is detached.
func unmountUnder(dir string) error {
	for round := 0; round < 10; round++ {
		points := mountsUnder(dir)
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			if err := syscall.Unmount(p, 0); err != nil {
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("still mounted: %v", left)
	}
	return nil
}

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

// iptRule is a rule of iptables-save: its chain and its text after "-A ".
type iptRule struct{ chain, text string }

// target returns the chain a rule jumps or goes to, if any.
func (r iptRule) target() string {
	f := strings.Fields(r.text)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

// nodeChains picks, from one table, the chains to delete and the rules to
// delete from the chains that stay. KUBE-* chains are the node's: one
// kubelet and one kube-proxy run per machine (the machine lock). A rule
// naming the CNI network is the node's (portmap and bridge comment their
// rules with it); a CNI-* chain is deleted when nothing but the node's
// rules and jumps to deleted chains is in it, so another CNI user's
// chains stay (an empty shared one, CNI-HOSTPORT-*, goes: portmap makes it
// again when needed).
func nodeChains(chains []string, rules []iptRule) (del []string, delRules []iptRule) {
	deleted := map[string]bool{}
	for _, c := range chains {
		if strings.HasPrefix(c, "KUBE-") {
			deleted[c] = true
		}
	}
	ours := func(r iptRule) bool { return strings.Contains(r.text, networkName) || deleted[r.target()] }
	for changed := true; changed; {
		changed = false
		for _, c := range chains {
			if deleted[c] || !strings.HasPrefix(c, "CNI-") {
				continue
			}
			all := true
			for _, r := range rules {
				if r.chain == c && !ours(r) {
					all = false
					break
				}
			}
			if all {
				deleted[c], changed = true, true
			}
		}
	}
	for _, c := range chains {
		if deleted[c] {
			del = append(del, c)
		}
	}
	for _, r := range rules {
		if !deleted[r.chain] && ours(r) {
			delRules = append(delRules, r)
		}
	}
	return del, delRules
}

// removeChains deletes, for cmd (iptables or ip6tables), the node's chains
// and rules (nodeChains): the rules first, then the chains are flushed and
// deleted. It is one iptables-restore --noflush per table, built from
// iptables-save's own lines, so rules are matched exactly as written.
func removeChains(ctx context.Context, cmd string) error {
	saved, err := run(ctx, cmd+"-save")
	if err != nil {
		return err
	}
	var script strings.Builder
	var table string
	var chains []string
	var rules []iptRule
	flush := func() {
		del, delRules := nodeChains(chains, rules)
		if len(del) == 0 && len(delRules) == 0 {
			return
		}
		fmt.Fprintf(&script, "*%s\n", table)
		for _, r := range delRules {
			fmt.Fprintf(&script, "-D %s\n", r.text)
		}
		for _, c := range del {
			fmt.Fprintf(&script, "-F %s\n", c)
		}
		for _, c := range del {
			fmt.Fprintf(&script, "-X %s\n", c)
		}
		script.WriteString("COMMIT\n")
	}
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, chains, rules = strings.TrimPrefix(line, "*"), nil, nil
		case strings.HasPrefix(line, ":"):
			if name := strings.Fields(line[1:]); len(name) > 0 {
				chains = append(chains, name[0])
			}
		case strings.HasPrefix(line, "-A "):
			text := strings.TrimPrefix(line, "-A ")
			rules = append(rules, iptRule{chain: strings.Fields(text)[0], text: text})
		case line == "COMMIT":
			flush()
		}
	}
	if script.Len() == 0 {
		return nil
	}
	bin, err := lookPath(cmd + "-restore")
	if err != nil {
		return err
	}
	c := execCommand(ctx, bin, "--noflush")
	c.Stdin = strings.NewReader(script.String())
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s\ninput:\n%s", cmd, err, bytes.TrimSpace(out), script.String())
	}
	return nil
}

// nftTables lists the nftables tables ("ip filter"), or nil without nft.
func nftTables(ctx context.Context) []string {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil
	}
	tables := []string{} // not nil: nft runs
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// removeNewNftTables deletes the nftables tables that did not exist before
// the node started and are now empty of rules: iptables-nft creates the
// tables of the chains kube-proxy and the kubelet add, and removing the
// chains leaves them behind. A table holding any rule is left alone.
func removeNewNftTables(ctx context.Context, before []string) error {
	if before == nil {
		return nil // no nft, or no record of what was there
	}
	had := map[string]bool{}
	for _, t := range before {
		had[t] = true
	}
	var errs []error
	for _, t := range nftTables(ctx) {
		if had[t] {
			continue
		}
		f := strings.Fields(t)
		out, err := run(ctx, "nft", "list", "table", f[0], f[1])
		if err != nil || !nftTableEmpty(out) {
			continue
		}
		if _, err := run(ctx, "nft", "delete", "table", f[0], f[1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nftTableEmpty reports whether `nft list table` shows only base chains
// with an accept policy and no rule, sets or maps.
func nftTableEmpty(listing string) bool {
	for _, line := range strings.Split(listing, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "", l == "}", strings.HasPrefix(l, "table "), strings.HasPrefix(l, "chain "):
		case strings.HasPrefix(l, "type ") && strings.HasSuffix(l, "policy accept;"):
		default:
			return false
		}
	}
	return true
}

// removeCgroupRoot removes the node's cgroups, deepest first, killing what
// is still in them.
func removeCgroupRoot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_ = killCgroupProcesses(ctx)
		var left []string
		for _, d := range cgroupDirs() {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				left = append(left, d)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroups not removable: %v", left)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
