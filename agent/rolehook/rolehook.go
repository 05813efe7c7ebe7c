// Package rolehook runs the operator's executable when this member's role
// changes, for the world outside Kubernetes: a DNS record, a proxy's
// configuration, a page. It is called as
//
//	EXECUTABLE ROLE CLUSTER MEMBER
//
// with ROLE one of primary, replica or none (Patroni's on_role_change,
// without the action), and the same values in MYSQLHA_ROLE,
// MYSQLHA_CLUSTER and MYSQLHA_MEMBER.
//
// The hook never delays the agent: Changed only records the new role, and
// one goroutine runs the executable, one run at a time, each bounded by a
// timeout that kills its whole process group. Roles that change while a
// run is in progress are coalesced: the next run gets the latest role, so
// a hook always ends up told the role the member has. A failure is logged,
// and not retried: the next change runs the hook again.
package rolehook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Hook runs one executable at role changes; build it with New.
type Hook struct {
	path            string
	timeout         time.Duration
	cluster, member string
	log             *zap.Logger

	mu      sync.Mutex
	pending string // the role to announce next; "" when none
	wake    chan struct{}
}

// Check says whether path can be run as a hook: an absolute path to an
// executable regular file. The agent checks it at start, so that a typo is
// a failed start rather than a hook that never runs.
func Check(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("--on-role-change %q: give an absolute path", path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--on-role-change: %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("--on-role-change %s: not an executable file (mode %s)", path, st.Mode())
	}
	return nil
}

// New returns a hook that runs path, each run bounded by timeout; Run
// starts it.
func New(path string, timeout time.Duration, cluster, member string, log *zap.Logger) *Hook {
	return &Hook{path: path, timeout: timeout, cluster: cluster, member: member, log: log, wake: make(chan struct{}, 1)}
}

// Changed records that the member's role is now role. It never blocks.
func (h *Hook) Changed(role string) {
	h.mu.Lock()
	h.pending = role
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default: // a wake-up is already pending; it will read the latest role
	}
}

// Run runs the hook for every change recorded, until ctx ends.
func (h *Hook) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.mu.Lock()
		role := h.pending
		h.pending = ""
		h.mu.Unlock()
		if role != "" {
			h.run(ctx, role)
		}
	}
}

// stderrLimit bounds what of a failed run's output is logged.
const stderrLimit = 2048

func (h *Hook) run(ctx context.Context, role string) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.path, role, h.cluster, h.member)
	cmd.Env = append(os.Environ(), "MYSQLHA_ROLE="+role, "MYSQLHA_CLUSTER="+h.cluster, "MYSQLHA_MEMBER="+h.member)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so that a timeout kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a grandchild holding the output open
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	fields := []zap.Field{zap.String("hook", h.path), zap.String("role", role), zap.Duration("took", took)}
	switch {
	case err == nil:
		h.log.Info("role change hook ran", fields...)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		h.log.Warn("role change hook killed: it ran past its timeout", append(fields,
			zap.Duration("timeout", h.timeout), zap.String("output", tail(out.Bytes())))...)
	default:
		h.log.Warn("role change hook failed", append(fields, zap.Error(err), zap.String("output", tail(out.Bytes())))...)
	}
}

func tail(b []byte) string {
	if len(b) > stderrLimit {
		b = b[len(b)-stderrLimit:]
	}
	return string(bytes.TrimSpace(b))
}
