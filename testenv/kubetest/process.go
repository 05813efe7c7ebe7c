package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// process is a control-plane binary running as a child process, with its
// stdout and stderr in a log file.
type process struct {
	cmd      *exec.Cmd
	logFile  string
	exited   chan struct{} // closed when the process has been reaped
	stopOnce sync.Once
}

// launchProcess runs bin with args in dir, its output in logFile (truncated
// first), and waits until ready returns nil; ready is called every 100 ms,
// each call bounded by 2 s, for readyTimeout at most. If the process is not
// ready by then or exits, it is killed and the error, naming what (e.g.
// "kube-apiserver https://127.0.0.1:6443"), ends with the tail of the log.
func launchProcess(what, bin, dir, logFile string, args []string, ready func(context.Context) error) (*process, error) {
	logf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy of the descriptor

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = dir
	// Own process group (a ^C to `go test` is handled by the test binary,
	// which then cleans up), and SIGKILL when the process that started it
	// dies for any reason, so that no control plane outlives its test or
	// demo. Pdeathsig is tied to the forking OS thread; the Go runtime does
	// not retire threads except those of goroutines that exit while locked
	// to them, which we never do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logFile: logFile, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()

	if err := p.waitReady(ready); err != nil {
		p.killOnce()
		return nil, fmt.Errorf("%s did not become ready after %v: %w\n--- last lines of %s:\n%s",
			what, time.Since(began).Round(time.Millisecond), err, logFile, localproc.Tail(logFile, 40))
	}
	return p, nil
}

func (p *process) waitReady(ready func(context.Context) error) error {
	deadline := time.Now().Add(readyTimeout)
	lastErr := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("process exited: %v", p.cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %v: last answer: %w", readyTimeout, lastErr)
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// kill sends SIGKILL to the process group and waits for the process.
func (p *process) kill() {
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.exited
}

// killOnce kills the process unless it was stopped or killed before.
func (p *process) killOnce() { p.stopOnce.Do(p.kill) }

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and
// waits for the process, unless it was stopped or killed before.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			p.kill()
		}
	})
}
