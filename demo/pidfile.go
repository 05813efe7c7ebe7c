package demo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// pidFileName, in the work dir, holds the supervisor's pid: it marks the
// directory as the demo's (so a stale one may be removed) and lets
// `make demo-stop` signal the supervisor.
const pidFileName = "demo.pid"

// claimDir makes dir the work dir of this process. A work dir left by a demo
// that was killed (its pid file names a dead process) is removed first: its
// servers and agents died with it (parent-death signal). A directory that
// is not the demo's is never touched.
func claimDir(dir string) error {
	pidPath := filepath.Join(dir, pidFileName)
	if pid, err := readPid(pidPath); err == nil {
		if localproc.Alive(pid) {
			return fmt.Errorf("a demo already runs (pid %d, work dir %s): stop it with `make demo-stop` or Ctrl-C in its terminal", pid, dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing the work dir %s of a demo that died: %w", dir, err)
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not a demo work dir (no %s): remove it or choose another --dir", dir, pidFileName)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a pid: %q", path, b)
	}
	return pid, nil
}

// Stop signals the demo whose work dir is dir (SIGTERM, as Ctrl-C would) and
// waits until it has stopped everything and exited.
func Stop(dir string, out io.Writer, timeout time.Duration) error {
	pidPath := filepath.Join(dir, pidFileName)
	pid, err := readPid(pidPath)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "no demo is running (no %s)\n", pidPath)
		return nil
	}
	if err != nil {
		return err
	}
	if !localproc.Alive(pid) {
		fmt.Fprintf(out, "the demo (pid %d) is not running any more; removing its work dir %s\n", pid, dir)
		return os.RemoveAll(dir)
	}
	began := time.Now()
	fmt.Fprintf(out, "stopping the demo (pid %d): it stops its agents, servers and DCS and removes %s ... ", pid, dir)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling pid %d: %w", pid, err)
	}
	for localproc.Alive(pid) {
		if time.Since(began) > timeout {
			fmt.Fprintln(out, "still running")
			return fmt.Errorf("the demo (pid %d) did not stop within %v; its terminal shows why; kill -9 %d stops it and everything it started", pid, timeout, pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(out, "stopped (%s)\n", seconds(time.Since(began)))
	return nil
}
