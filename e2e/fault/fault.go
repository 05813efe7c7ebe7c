// Package fault injects faults into the pods of the test node from the host:
// network partitions and packet loss inside a pod's network namespace
// (iptables), delay (a netfilter queue, see Delay), and signals to a
// container's processes. Every fault is recorded by the Injector that made
// it, and Injector.HealAll undoes whatever is still in place, in reverse
// order, so that a failing scenario leaves no cut link behind.
package fault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault is one injected fault.
type Fault struct {
	Name string
	heal func() error
	once sync.Once
	err  error
}

// Heal undoes the fault; only the first call acts.
func (f *Fault) Heal() error {
	f.once.Do(func() {
		if f.heal != nil {
			f.err = f.heal()
		}
	})
	return f.err
}

// Injector makes faults and remembers them until healed.
type Injector struct {
	mu     sync.Mutex
	faults []*Fault
	seq    int
}

// Inject runs do and records heal as its undo; when do fails nothing is
// recorded, and heal is run anyway in case do got half-way.
func (in *Injector) Inject(name string, do, heal func() error) (*Fault, error) {
	if err := do(); err != nil {
		if heal != nil {
			_ = heal()
		}
		return nil, fmt.Errorf("fault %s: %w", name, err)
	}
	f := &Fault{Name: name, heal: heal}
	in.mu.Lock()
	in.faults = append(in.faults, f)
	in.mu.Unlock()
	return f, nil
}

// HealAll heals every fault still in place, newest first, and returns
// the errors joined.
func (in *Injector) HealAll() error {
	in.mu.Lock()
	faults := in.faults
	in.faults = nil
	in.mu.Unlock()
	var errs []error
	for i := len(faults) - 1; i >= 0; i-- {
		if err := faults[i].Heal(); err != nil {
			errs = append(errs, fmt.Errorf("healing %s: %w", faults[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

func (in *Injector) chain() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.seq++
	return "MYSQLHA-FAULT-" + strconv.Itoa(in.seq)
}

// Isolate drops every packet into and out of the namespace but its
// loopback's: the pod is cut off from everything, the API server, its
// peers, the clients and the kubelet's network probes alike.
func (in *Injector) Isolate(netns string) (*Fault, error) {
	return in.filter("isolate "+netns, netns, [][]string{{"-j", "DROP"}}, nil)
}

// CutFrom drops the packets between the namespace and each of addrs, an IP
// or IP:port (the port being the remote end's), and nothing else.
func (in *Injector) CutFrom(netns string, addrs ...string) (*Fault, error) {
	if len(addrs) == 0 {
		return nil, errors.New("fault: CutFrom needs at least one address")
	}
	var rules [][]string
	for _, a := range addrs {
		ip, port := a, ""
		if i := strings.LastIndex(a, ":"); i > 0 && !strings.Contains(a[i+1:], ".") {
			ip, port = a[:i], a[i+1:]
		}
		out, in := []string{"-d", ip}, []string{"-s", ip}
		if port != "" {
			out = append(out, "-p", "tcp", "--dport", port)
			in = append(in, "-p", "tcp", "--sport", port)
		}
		rules = append(rules, append(out, "-j", "DROP"), append(in, "-j", "DROP"))
	}
	return in.filter(fmt.Sprintf("cut %s from %v", netns, addrs), netns, rules, nil)
}

// Loss drops each packet into or out of the namespace (loopback aside) with
// the given probability, 0 < p < 1.
func (in *Injector) Loss(netns string, p float64) (*Fault, error) {
	if p <= 0 || p >= 1 {
		return nil, fmt.Errorf("fault: loss probability %v: want 0 < p < 1", p)
	}
	return in.filter(fmt.Sprintf("%.0f%% loss on %s", p*100, netns), netns, [][]string{
		{"-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(p, 'f', 3, 64), "-j", "DROP"}}, nil)
}

// filter puts rules in a chain of their own, jumped to from INPUT and
// OUTPUT after letting loopback through; healing removes the jumps and the
// chain, then runs after (when not nil), also when the injection fails. A
// namespace gone by then (its pod deleted) has no rules left to remove.
func (in *Injector) filter(name, netns string, rules [][]string, after func()) (*Fault, error) {
	chain := in.chain()
	ipt := func(args ...string) error { return iptables(netns, args...) }
	do := func() error {
		if err := ipt("-N", chain); err != nil {
			return err
		}
		for _, r := range rules {
			if err := ipt(append([]string{"-A", chain}, r...)...); err != nil {
				return err
			}
		}
		if err := ipt("-I", "INPUT", "1", "!", "-i", "lo", "-j", chain); err != nil {
			return err
		}
		return ipt("-I", "OUTPUT", "1", "!", "-o", "lo", "-j", chain)
	}
	heal := func() error {
		if after != nil {
			defer after()
		}
		if _, err := os.Stat(netns); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		// Each step may find nothing to undo after a half-done injection.
		_ = ipt("-D", "INPUT", "!", "-i", "lo", "-j", chain)
		_ = ipt("-D", "OUTPUT", "!", "-o", "lo", "-j", chain)
		_ = ipt("-F", chain)
		if err := ipt("-X", chain); err != nil && !strings.Contains(err.Error(), "No chain") &&
			!strings.Contains(err.Error(), "does not exist") {
			return err
		}
		return nil
	}
	return in.Inject(name, do, heal)
}

// Freeze stops pid with SIGSTOP; healing continues it (SIGCONT), unless it
// is gone by then.
func (in *Injector) Freeze(pid int) (*Fault, error) {
	return in.Inject(fmt.Sprintf("SIGSTOP %d", pid), func() error {
		return syscall.Kill(pid, syscall.SIGSTOP)
	}, func() error {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	})
}

// Kill sends SIGKILL to pid, as a crash would; there is nothing to heal.
func Kill(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("fault: kill -9 %d: %w", pid, err)
	}
	return nil
}

func iptables(netns string, args ...string) error {
	// -w: wait for the xtables lock that kube-proxy takes on the host.
	return nsExec(netns, "iptables", append([]string{"-w", "5"}, args...)...)
}

// nsExec runs a host command inside the network namespace at path.
func nsExec(netns, cmd string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + netns, cmd}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s in %s: %v: %s", cmd, strings.Join(args, " "), netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}
