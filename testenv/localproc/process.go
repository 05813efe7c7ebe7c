// Package localproc runs the local child processes of the demo (package
// demo) and of the end-to-end tests (package e2e): MariaDB, agents and the
// like, started on this machine by a supervisor that must not leave them
// behind. It owns three things they need (the control-plane harnesses,
// testenv/kubetest and e2e/realnode, use its log tail too):
//
//   - starting a process as the leader of a process group of its own, which
//     dies with its parent (parent-death signal SIGKILL), and stopping it by
//     signalling the whole group, so that whatever the leader started goes
//     with it;
//   - the tail of a process's log, dumped when a run fails;
//   - the leak check: a scan of /proc for live processes a run left behind.
//
// It is Linux only (Pdeathsig, /proc). Pdeathsig fires when the OS thread
// that forked the child exits, not the process; the Go runtime retires a
// thread only when a goroutine exits while locked to it, which callers of
// this package must not do around Start.
//
// It guarantees nothing about processes that leave their group (setsid,
// setpgid): Stop reports and kills only the group's members.
package localproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// KillWait bounds how long Stop waits for the leader after SIGKILL.
const KillWait = 10 * time.Second

// Errors that Stop's error wraps.
var (
	// ErrKilled: the leader did not exit within the grace period after the
	// requested signal, and the group was killed.
	ErrKilled = errors.New("localproc: not exited within the grace period; killed")
	// ErrSurvivedKill: the leader had not exited KillWait after SIGKILL.
	ErrSurvivedKill = errors.New("localproc: survived SIGKILL")
	// ErrGroupLeft: the leader has exited but its group still has live
	// processes.
	ErrGroupLeft = errors.New("localproc: process group still has live processes after its leader exited")
)

// Process is a child started by Start: the leader of its own process group,
// reaped in the background.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// isolate makes cmd the leader of a new process group, so that a signal to
// the group (or a ^C on the terminal, which reaches only the foreground
// group) can be aimed, and has it killed when its parent dies.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Start starts cmd as the leader of a new process group that is killed
// with the calling process, and reaps it in the background (Done). It sets
// cmd.SysProcAttr.
func Start(cmd *exec.Cmd) (*Process, error) {
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// StartLogged starts argv (binary first) like Start, with its stdout and
// stderr appended to logPath (created when missing) after the line banner,
// when banner is not empty. Appending keeps one log across restarts.
func StartLogged(argv []string, logPath, banner string) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("localproc: no command")
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	if banner != "" {
		fmt.Fprintln(f, banner)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	return Start(cmd)
}

// Run runs cmd to completion like exec.Cmd.Run, as the leader of a new
// process group that is killed with the calling process; when cmd was made
// by exec.CommandContext, the end of the context kills the whole group
// rather than the leader alone. It sets cmd.SysProcAttr and cmd.Cancel.
func Run(cmd *exec.Cmd) error {
	isolate(cmd)
	if cmd.Cancel != nil { // set by exec.CommandContext, the only one allowed to
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	}
	return cmd.Run()
}

// Pid is the leader's pid, which is also the group's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the leader has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the leader has exited and been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to every process of the group, e.g. SIGSTOP or SIGCONT.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.Pid(), sig)
}

// Stop sends sig to the group and waits up to grace for the leader to exit;
// if it has not, it kills the group (SIGKILL) and waits up to KillWait more.
// Then it checks that no live process is left in the group, allowing the
// others a moment (GroupSettle) to act on the same signal. It returns nil
// when the leader exited within grace and left nothing behind; otherwise an
// error wrapping ErrKilled, ErrSurvivedKill and/or ErrGroupLeft. Processes
// left in the group after the leader exited are reported, not killed: a
// caller that wants them gone calls Kill.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	var errs []error
	p.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		errs = append(errs, fmt.Errorf("pid %d, %v after %v: %w", p.Pid(), grace, sig, ErrKilled))
		p.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(KillWait):
			errs = append(errs, fmt.Errorf("pid %d, for %v: %w", p.Pid(), KillWait, ErrSurvivedKill))
		}
	}
	if left := waitGroupGone(p.Pid(), GroupSettle); len(left) > 0 {
		errs = append(errs, fmt.Errorf("group %d: %w: %v", p.Pid(), ErrGroupLeft, left))
	}
	return errors.Join(errs...)
}

// Kill kills the whole group (SIGKILL), including processes the leader
// left behind when it exited, and waits as Stop does.
func (p *Process) Kill() error {
	return p.Stop(syscall.SIGKILL, KillWait)
}

// GroupSettle is how long Stop gives the rest of a group to die after its
// leader has exited: a signal to a group is delivered to each member on its
// own, and a member dies a moment after the leader.
const GroupSettle = time.Second

// waitGroupGone polls group pgid until no live process is left in it or
// within has passed, and returns those still alive.
func waitGroupGone(pgid int, within time.Duration) []Proc {
	deadline := time.Now().Add(within)
	for {
		left := GroupMembers(pgid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GroupMembers lists the live processes of process group pgid: none once
// the group is gone or only zombies are left in it.
func GroupMembers(pgid int) []Proc {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return Scan(func(p Proc) bool { return p.Pgid == pgid })
}
