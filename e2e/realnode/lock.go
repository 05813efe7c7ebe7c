package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node uses machine-wide names (the bridge, 198.18.10.0/24, the cgroup
// root), so one node runs at a time per machine: `go test ./...` runs
// packages in parallel, and two of them may start a node. The lock is a
// flock, released by the kernel when its holder dies however it dies.
const (
	lockPath   = "/run/mysqlha-realnode.lock"
	recordPath = "/run/mysqlha-realnode.json"
)

// record is what teardown needs to undo a node, kept in recordPath from
// before the first change to the machine until the teardown has finished,
// so that a node whose test binary was killed (SIGKILL, a panic in another
// goroutine, a timeout) is undone by the next Start.
type record struct {
	Dir string `json:"dir"`
	PID int    `json:"pid"`
	// Sysctls holds the values, before the node started, of the sysctls
	// that the node's components (or the node itself) may change.
	Sysctls map[string]string `json:"sysctls"`
	// Created lists the host directories outside Dir that did not exist
	// before the node started (e.g. /var/lib/kubelet).
	Created []string `json:"created"`
	// NftTables lists the nftables tables that existed before the node
	// started ("ip filter", ...), when nft is installed.
	NftTables []string `json:"nftTables"`
}

// machineLock is the held flock.
type machineLock struct{ f *os.File }

// acquireMachineLock waits until no other node runs on this machine (or ctx
// ends), calling logf once if it has to wait.
func acquireMachineLock(ctx context.Context, logf func(string, ...any)) (*machineLock, error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", lockPath, err)
	}
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return &machineLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", lockPath, err)
		}
		if !logged {
			holder, _ := os.ReadFile(lockPath)
			logf("realnode: another node runs on this machine (pid %s holds %s); waiting", strings.TrimSpace(string(holder)), lockPath)
			logged = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s: %w", lockPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (l *machineLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

func readRecord() (*record, error) {
	data, err := os.ReadFile(recordPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", recordPath, err)
	}
	return &r, nil
}

func writeRecord(r *record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := recordPath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, recordPath)
}
