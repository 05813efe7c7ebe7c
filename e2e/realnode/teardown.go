package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
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
