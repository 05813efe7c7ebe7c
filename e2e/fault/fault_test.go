package fault

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair makes two network namespaces joined by a veth pair, a at
// 198.18.250.1 and b at 198.18.250.2, and returns their paths.
func pair(t *testing.T) (a, b string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("fault tests need root (network namespaces and iptables)")
	}
	suffix := fmt.Sprintf("%d", os.Getpid()%100000)
	na, nb := "fta"+suffix, "ftb"+suffix
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run("netns", "add", na)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", na).Run() })
	run("netns", "add", nb)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", nb).Run() })
	run("-n", na, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", nb)
	for _, x := range []struct{ ns, ip string }{{na, "198.18.250.1/30"}, {nb, "198.18.250.2/30"}} {
		run("-n", x.ns, "addr", "add", x.ip, "dev", "eth0")
		run("-n", x.ns, "link", "set", "eth0", "up")
		run("-n", x.ns, "link", "set", "lo", "up")
	}
	return filepath.Join("/var/run/netns", na), filepath.Join("/var/run/netns", nb)
}

// listenIn listens on TCP addr inside the namespace: the socket belongs to
// the namespace of the thread that made it.
func listenIn(t *testing.T, netns, addr string) net.Listener {
	t.Helper()
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open(netns)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, err}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- res{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	go func() {
		for {
			c, err := r.l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return r.l
}

// dialFrom reports whether a TCP connection from inside netns to addr
// succeeds within 300 ms.
func dialFrom(netns, addr string) bool { return dialFromTimeout(netns, addr, 300*time.Millisecond) }

func dialFromTimeout(netns, addr string, timeout time.Duration) bool {
	ch := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(netns)
		if err != nil {
			ch <- false
			return
		}
		defer f.Close()
		if unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) != nil {
			ch <- false
			return
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close()
		}
		ch <- err == nil
	}()
	return <-ch
}

func TestIsolateCutsAndHealRestores(t *testing.T) {
	a, b := pair(t)
	listenIn(t, b, "198.18.250.2:7000")
	listenIn(t, a, "127.0.0.1:7001")
	if !dialFrom(a, "198.18.250.2:7000") {
		t.Fatal("no connection before the fault")
	}
	var in Injector
	f, err := in.Isolate(a)
	if err != nil {
		t.Fatal(err)
	}
	if dialFrom(a, "198.18.250.2:7000") {
		t.Fatal("connected out of an isolated namespace")
	}
	if !dialFrom(a, "127.0.0.1:7001") {
		t.Fatal("isolation cut loopback too")
	}
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	if !dialFrom(a, "198.18.250.2:7000") {
		t.Fatal("no connection after healing")
	}
	if err := f.Heal(); err != nil {
		t.Fatalf("second Heal: %v", err)
	}
}

func TestCutFromOnlyThatPort(t *testing.T) {
	a, b := pair(t)
	listenIn(t, b, "198.18.250.2:7000")
	listenIn(t, b, "198.18.250.2:7002")
	var in Injector
	if _, err := in.CutFrom(a, "198.18.250.2:7000"); err != nil {
		t.Fatal(err)
	}
	if dialFrom(a, "198.18.250.2:7000") {
		t.Fatal("connected through a cut")
	}
	if !dialFrom(a, "198.18.250.2:7002") {
		t.Fatal("the cut took another port too")
	}
	if err := in.HealAll(); err != nil {
		t.Fatal(err)
	}
	if !dialFrom(a, "198.18.250.2:7000") {
		t.Fatal("no connection after HealAll")
	}
}

func TestHealAfterNamespaceGone(t *testing.T) {
	a, _ := pair(t)
	var in Injector
	if _, err := in.Isolate(a); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "del", filepath.Base(a)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := in.HealAll(); err != nil {
		t.Fatalf("healing a fault whose namespace is gone: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	var in Injector
	if _, err := in.Loss("/nonexistent", 1.5); err == nil || !strings.Contains(err.Error(), "0 < p < 1") {
		t.Fatalf("loss 1.5: %v", err)
	}
	if _, err := in.CutFrom("/nonexistent"); err == nil {
		t.Fatal("CutFrom with no address accepted")
	}
	if _, err := in.Isolate("/nonexistent/netns"); err == nil || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Fatalf("isolating a missing namespace: %v, want an error naming it", err)
	}
}

// Delay holds each outgoing packet: a TCP handshake from the delayed
// namespace takes at least the delay (its SYN waits), and healing removes it.
func TestDelayDelaysPackets(t *testing.T) {
	a, b := pair(t)
	listenIn(t, b, "198.18.250.2:7000")
	connect := func() time.Duration {
		began := time.Now()
		if !dialFromTimeout(a, "198.18.250.2:7000", 3*time.Second) {
			t.Fatal("no connection")
		}
		return time.Since(began)
	}
	var in Injector
	f, err := in.Delay(a, 7, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if took := connect(); took < 300*time.Millisecond || took > 1500*time.Millisecond {
		t.Fatalf("a connection with 300ms of delay took %s", took)
	}
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	if took := connect(); took > 100*time.Millisecond {
		t.Fatalf("a connection after healing took %s", took)
	}
}
