package fault

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A thread must survive making a socket in another namespace. The node's
// control plane runs as children with Pdeathsig, which fires when the OS
// thread that forked them exits; a goroutine that exits still locked to its
// thread makes the Go runtime end that thread. socketIn once discarded its
// thread that way, and the controller manager, forked earlier from the same
// thread, died in the middle of the fault scenarios.
func TestSocketInKeepsTheThread(t *testing.T) {
	if syscall.Geteuid() != 0 {
		t.Fatal("needs root (setns)")
	}
	// Several threads at once: the runtime never ends the main thread (it
	// parks it instead), and any one of these may be it.
	const threads = 4
	type result struct {
		cmd *exec.Cmd
		err error
	}
	results := make(chan result, threads)
	for range threads {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cmd := exec.Command("sleep", "30")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				results <- result{err: err}
				return
			}
			fd, err := inNetns("/proc/self/ns/net", func() (int, error) {
				return syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 12 /* NETLINK_NETFILTER */)
			})
			if err == nil {
				syscall.Close(fd)
			}
			results <- result{cmd, err}
		}()
	}
	exited := make(chan error, threads)
	for range threads {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.cmd.Process.Kill()
		go func() { exited <- r.cmd.Wait() }()
	}
	select {
	case err := <-exited:
		t.Fatalf("a child forked by a thread died after that thread made a socket (%v): the thread was ended", err)
	case <-time.After(500 * time.Millisecond):
	}
}
