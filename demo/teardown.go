package demo

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// track records a process the demo started, for teardown's check that
// none is left.
func (d *demo) track(pid int, what string) {
	if pid == 0 {
		return
	}
	d.pidMu.Lock()
	defer d.pidMu.Unlock()
	d.pids[pid] = what
}

// dumpLogs prints, after a failed step, the tail of every agent log and
// mysqld error log, and in Kubernetes mode the control plane's logs.
func (d *demo) dumpLogs() {
	for _, m := range d.members {
		if m.logPath != "" {
			d.p.plain("----- %s: last 30 lines of the agent log %s -----\n%s", m.name, m.logPath, localproc.Tail(m.logPath, 30))
		}
		d.p.plain("----- %s: last 8 lines of the mysqld error log -----\n%s", m.name, localproc.Tail(m.server.LogPath(), 8))
	}
	if k, ok := d.be.(*kubeBackend); ok {
		k.dumpLogs(d.p)
	}
}

// teardown stops agents, servers and the DCS, checks that no process the
// demo started is left, and removes the work dir.
func (d *demo) teardown() error {
	var errs []error
	if len(d.members) > 0 {
		d.p.start("stopping %d agents (SIGTERM)", len(d.members))
		var wg sync.WaitGroup
		for _, m := range d.members {
			wg.Add(1)
			go func() { defer wg.Done(); m.stopAgent(syscall.SIGTERM, 10*time.Second) }()
		}
		wg.Wait()
		d.p.done("stopped")
		d.p.start("stopping %d MariaDB servers", len(d.members))
		for _, m := range d.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if m.app != nil {
					m.app.Close()
				}
				m.server.Stop()
			}()
		}
		wg.Wait()
		d.p.done("stopped")
	}
	if d.be != nil {
		d.p.start("stopping the DCS")
		d.be.stop()
		d.p.done("stopped")
	}

	d.p.start("checking that no process the demo started is left")
	var left []string
	d.pidMu.Lock()
	n := len(d.pids)
	for pid, what := range d.pids {
		if localproc.Alive(pid) {
			left = append(left, fmt.Sprintf("%s (pid %d)", what, pid))
		}
	}
	d.pidMu.Unlock()
	// A mariadbd (--datadir) or agent (--mysql-password-file) of this demo
	// that escaped the pid bookkeeping names a path in the work dir.
	for _, p := range localproc.Scan(localproc.Under(d.cfg.Dir)) {
		left = append(left, p.String())
	}
	if len(left) > 0 {
		d.p.failed()
		errs = append(errs, fmt.Errorf("processes left running: %s", strings.Join(left, ", ")))
	} else {
		d.p.done("none left (%d started)", n)
	}

	if d.cfg.Keep {
		d.p.note("kept %s (--keep); the next demo run removes it", d.cfg.Dir)
	} else {
		d.p.start("removing %s", d.cfg.Dir)
		if err := os.RemoveAll(d.cfg.Dir); err != nil {
			d.p.failed()
			errs = append(errs, err)
		} else {
			d.p.done("removed")
		}
	}
	return errors.Join(errs...)
}
