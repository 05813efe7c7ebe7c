// Package mysqldproc finds and kills the local mysqld process, for an agent
// that shares its process namespace: the same host, or a pod with
// shareProcessNamespace: true. A hung mysqld neither answers nor refuses,
// so no SQL can fence it; killing its process is the one way to make it
// provably unable to take writes before another member promotes.
package mysqldproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotFound: no visible mysqld process holds the pid file (another
// process namespace, or another user's process without the right to read
// its root).
var ErrNotFound = errors.New("mysqldproc: no visible mysqld process holds that pid file")

// procDir is where processes are listed.
const procDir = "/proc"

// names are the process names (comm) of the servers.
var names = map[string]bool{"mariadbd": true, "mysqld": true}

// Find returns the pid of the mysqld whose pid file, at pidFile as the
// server names it (@@pid_file), holds its own pid. The file is read through
// the process's own root (/proc/<pid>/root), so it is found from another
// container of the pod as well as from the host.
func Find(pidFile string) (int, error) {
	if !filepath.IsAbs(pidFile) {
		return 0, fmt.Errorf("mysqldproc: pid file %q is not an absolute path", pidFile)
	}
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0, fmt.Errorf("mysqldproc: listing processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procDir, e.Name(), "comm"))
		if err != nil || !names[strings.TrimSpace(string(comm))] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "root", pidFile))
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n == pid {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("%w: %s", ErrNotFound, pidFile)
}

// Kill finds the mysqld of pidFile, sends it SIGKILL (which also ends a
// stopped process) and waits until it is gone, or ctx ends. Gone means
// exited or a zombie: either runs no code and holds no socket.
func Kill(ctx context.Context, pidFile string) (int, error) {
	pid, err := Find(pidFile)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return pid, fmt.Errorf("mysqldproc: killing mysqld %d: %w", pid, err)
	}
	for !gone(pid) {
		select {
		case <-ctx.Done():
			return pid, fmt.Errorf("mysqldproc: mysqld %d still running after SIGKILL: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return pid, nil
}

// gone reports whether pid has exited or is a zombie.
func gone(pid int) bool {
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state == 'Z' || state == 'X'
}
