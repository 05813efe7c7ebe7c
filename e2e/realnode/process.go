package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// process is a node component running as a child process, its stdout and
// stderr in a log file.
type process struct {
	name     string
	cmd      *exec.Cmd
	logFile  string
	exited   chan struct{} // closed when the process has been reaped
	killOnce sync.Once
}

// startProcess runs bin with args, its output in logFile (truncated first).
// The process gets its own process group and SIGKILL when the thread that
// forked it dies (Pdeathsig): the Go runtime never retires threads except
// those of goroutines that exit locked to them, which this package never
// does, so in practice the component dies with the test binary.
func startProcess(name, bin string, args []string, logFile string) (*process, error) {
	// Appended: a restarted component's log keeps its predecessor's.
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy of the descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logFile: logFile, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// childEnv is the environment of every component: ours, with the sbin
// directories in PATH (iptables, ip, runc and mount live there on Debian,
// and `go test` is often run without them).
func childEnv() []string {
	env := os.Environ()
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + extendPath(strings.TrimPrefix(kv, "PATH="))
			return env
		}
	}
	return append(env, "PATH="+extendPath(""))
}

func extendPath(path string) string {
	have := map[string]bool{}
	parts := strings.Split(path, ":")
	for _, p := range parts {
		have[p] = true
	}
	for _, d := range sbinDirs {
		if !have[d] {
			parts = append(parts, d)
		}
	}
	return strings.Trim(strings.Join(parts, ":"), ":")
}

var sbinDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

func (p *process) pid() int { return p.cmd.Process.Pid }

// alive reports whether the process has not exited yet.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process group and waits for the process; only
// the first call acts.
func (p *process) kill() {
	p.killOnce.Do(func() {
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
	})
}

// waitUntil calls check every interval until it returns nil, ctx ends or
// one of procs exits; the error then names what was awaited, the last
// answer, and for an exited process the tail of its log.
func waitUntil(ctx context.Context, what string, interval time.Duration, check func(context.Context) error, procs ...*process) error {
	for {
		for _, p := range procs {
			if p != nil && !p.alive() {
				return fmt.Errorf("waiting for %s: %s exited (%v)\n--- last lines of %s:\n%s",
					what, p.name, p.cmd.ProcessState, p.logFile, localproc.Tail(p.logFile, 30))
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last answer: %v)", what, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// run runs a short host command (ip, iptables, ctr) and returns its output,
// or an error holding the command and its output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	bin, err := lookPath(name)
	if err != nil {
		return "", err
	}
	out, err := execCommand(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// execCommand is exec.CommandContext with childEnv.
func execCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv()
	return cmd
}

// lookPath finds a host binary in PATH or the sbin directories.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", err
		}
		return name, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range sbinDirs {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or %s", name, strings.Join(sbinDirs, ", "))
}
