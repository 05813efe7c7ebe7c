package localproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startSh starts `sh -c script` with its output in a log under a temporary
// dir, and kills its group when the test ends.
func startSh(t *testing.T, script string) (*Process, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "sh.log")
	p, err := StartLogged([]string{"sh", "-c", script}, log, "=== started ===")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p, log
}

// childPid waits for the script to write the pid of its background child
// ($!) as the log's second line, after the banner.
func childPid(t *testing.T, log string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) >= 2 {
			if lines[0] != "=== started ===" {
				t.Fatalf("log starts with %q, want the banner", lines[0])
			}
			pid, err := strconv.Atoi(lines[1])
			if err != nil {
				t.Fatalf("log line %q: %v", lines[1], err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child pid in the log after 10 s: %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d did not exit", p.Pid())
	}
}

// A child left running by a leader that has exited is still in the
// leader's group, and Kill reaches it.
func TestKillReachesAChildThatOutlivesTheLeader(t *testing.T) {
	p, log := startSh(t, `sleep 300 & echo $!`)
	child := childPid(t, log)
	waitDone(t, p)
	if !p.Exited() {
		t.Fatal("Exited is false after Done was closed")
	}
	if !Alive(child) {
		t.Fatalf("the child %d is not running after the leader exited", child)
	}
	if got := GroupMembers(p.Pid()); len(got) != 1 || got[0].Pid != child {
		t.Fatalf("group %d members %v, want only the child %d", p.Pid(), got, child)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill: %v", err)
	}
	if Alive(child) {
		t.Errorf("the child %d survived Kill", child)
	}
}

// A group that ignores the requested signal is killed after the grace
// period, children and all, and Stop says so.
func TestStopKillsAGroupThatIgnoresTheSignal(t *testing.T) {
	p, log := startSh(t, `trap '' TERM; sleep 300 & echo $!; wait`)
	child := childPid(t, log)
	began := time.Now()
	err := p.Stop(syscall.SIGTERM, 300*time.Millisecond)
	if !errors.Is(err, ErrKilled) || errors.Is(err, ErrGroupLeft) || errors.Is(err, ErrSurvivedKill) {
		t.Errorf("Stop: %v; want only ErrKilled", err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("Stop returned after %v, before the grace period", took)
	}
	if !p.Exited() || Alive(child) {
		t.Errorf("after Stop: leader exited %v, child %d alive %v", p.Exited(), child, Alive(child))
	}
}

// A leader that obeys the signal while a child of its ignores it: Stop
// reports the child, does not kill it, and Kill then does.
func TestStopReportsWhatTheLeaderLeftBehind(t *testing.T) {
	// The child prints its pid once it ignores SIGTERM (an ignored signal
	// stays ignored across exec).
	p, log := startSh(t, `(trap '' TERM; exec sh -c 'echo $$; exec sleep 300') & wait`)
	child := childPid(t, log)
	err := p.Stop(syscall.SIGTERM, 5*time.Second)
	if !errors.Is(err, ErrGroupLeft) || errors.Is(err, ErrKilled) {
		t.Fatalf("Stop: %v; want only ErrGroupLeft", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(child)+" ") {
		t.Errorf("Stop's error %q does not name the child %d", err, child)
	}
	if !Alive(child) {
		t.Fatalf("Stop killed the child %d; it only reports it", child)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill: %v", err)
	}
	if Alive(child) {
		t.Errorf("the child %d survived Kill", child)
	}
}

// A clean exit on the signal is no error.
func TestStopCleanExit(t *testing.T) {
	p, err := Start(exec.Command("sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	if pgid, _ := syscall.Getpgid(p.Pid()); pgid != p.Pid() {
		t.Errorf("pid %d runs in group %d, want a group of its own", p.Pid(), pgid)
	}
	if err := p.Stop(syscall.SIGTERM, 5*time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if !p.Exited() {
		t.Error("Stop returned before the leader exited")
	}
}

// Run kills the whole group when the context ends: otherwise the
// background child would hold stdout open and Run would wait for it.
func TestRunKillsTheGroupOnCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `sleep 300 & echo $!; wait`)
	var out bytes.Buffer
	cmd.Stdout = &out
	began := time.Now()
	err := Run(cmd)
	if err == nil {
		t.Fatal("Run: no error after the context ended")
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("Run returned after %v", took)
	}
	child, perr := strconv.Atoi(strings.TrimSpace(out.String()))
	if perr != nil {
		t.Fatalf("output %q: %v", out.String(), perr)
	}
	// The pipe closes as the child exits, a moment before it is a zombie.
	for deadline := time.Now().Add(5 * time.Second); Alive(child) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(child) {
		t.Errorf("the child %d survived the cancel", child)
		syscall.Kill(child, syscall.SIGKILL)
	}
}

func TestStartLoggedAppends(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	for i := range 2 {
		p, err := StartLogged([]string{"echo", "run", strconv.Itoa(i)}, log, "=== start "+strconv.Itoa(i)+" ===")
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
	}
	b, _ := os.ReadFile(log)
	if want := "=== start 0 ===\nrun 0\n=== start 1 ===\nrun 1\n"; string(b) != want {
		t.Errorf("log %q, want %q", b, want)
	}
	if _, err := StartLogged(nil, log, ""); err == nil {
		t.Error("StartLogged with no command: no error")
	}
}
