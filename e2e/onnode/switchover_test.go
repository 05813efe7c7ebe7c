package onnode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/images"
)

// agentctl switchover under the write load, from the host, as an operator
// runs it with a kubeconfig: the named replica catches up, the old primary
// is fenced and the lock moves; nothing is lost, and the writes pause for
// well under a second.
func TestSwitchoverUnderLoad(t *testing.T) {
	scenario{
		name:   "agentctl switchover under load",
		leader: otherLeader,
		inject: func(tr *trial) error {
			cmd, err := agentctl(tr.c, "switchover", "--to="+tr.replicas[0].Name, "--force", "--wait", "--wait-timeout=60s")
			if err != nil {
				return err
			}
			tr.at = time.Now() // agentctl is built on first use
			go func() {
				if out, err := cmd.CombinedOutput(); err != nil {
					tr.fail("agentctl switchover: %v: %s", err, out)
				}
			}()
			return nil
		},
		verify: func(tr *trial, now corev1.Pod) error { return wantPrimary(now, tr.replicas[0].Name) },
		expect: checker.Expect{MaxOutage: 5 * time.Second},
		target: time.Second,
	}.run(t)
}

var (
	agentctlOnce sync.Once
	agentctlBin  string
	agentctlErr  error
	kubeconfig   string
)

// agentctl is the agentctl command, built once, against the node's API
// server with the admin kubeconfig.
func agentctl(c *cluster, args ...string) (*exec.Cmd, error) {
	agentctlOnce.Do(func() {
		root, err := images.RepoRoot()
		if err != nil {
			agentctlErr = err
			return
		}
		agentctlBin = filepath.Join(nodeDir, "agentctl")
		kubeconfig = filepath.Join(nodeDir, "kubeconfig")
		if agentctlErr = c.node.WriteKubeconfig(kubeconfig); agentctlErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "build", "-o", agentctlBin, "./cmd/agentctl")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			agentctlErr = fmt.Errorf("building agentctl: %v: %s", err, out)
		}
	})
	if agentctlErr != nil {
		return nil, agentctlErr
	}
	global := []string{"--dcs=kubernetes", "--kubeconfig=" + kubeconfig, "--namespace=" + namespace, "--cluster=" + clusterName}
	return exec.Command(agentctlBin, append(global, args...)...), nil
}

// agentctl restart of the primary under the write load: the primary hands
// over first (a switchover), then its agent shuts mysqld down and the
// kubelet restarts the server container, once; nothing is lost, writes
// pause only for the hand-over, and the old primary streams again.
func TestRestartPrimaryUnderLoad(t *testing.T) {
	var (
		done    chan struct{} // closed when this trial's agentctl returned
		before  int32         // the server container's restarts before it
		stopped string        // the primary whose mysqld restarts
	)
	scenario{
		name:   "agentctl restart of the primary under load",
		leader: otherLeader,
		inject: func(tr *trial) error {
			stopped, before, done = tr.primary.Name, serverRestarts(tr.primary), make(chan struct{})
			cmd, err := agentctl(tr.c, "restart", stopped, "--force", "--wait", "--wait-timeout=3m")
			if err != nil {
				return err
			}
			tr.at = time.Now()
			go func() {
				defer close(done)
				if out, err := cmd.CombinedOutput(); err != nil {
					tr.fail("agentctl restart: %v: %s", err, out)
				}
			}()
			return nil
		},
		verify: func(tr *trial, now corev1.Pod) error {
			select {
			case <-done:
			case <-time.After(3 * time.Minute):
				return fmt.Errorf("agentctl restart %s --wait did not return in 3 min", stopped)
			}
			if now.Name == stopped {
				return fmt.Errorf("%s still leads: it must hand over before its restart", stopped)
			}
			ctx := context.Background()
			if n := serverRestarts(tr.c.podNamed(ctx, stopped)); n != before+1 {
				return fmt.Errorf("%s's server container restarted %d times during the trial, want once", stopped, n-before)
			}
			var last historyEntry
			for _, e := range tr.c.history(ctx) {
				if e.Kind == "restart" && e.To == stopped {
					last = e
				}
			}
			if last.Reason != "done" {
				return fmt.Errorf("the history's last restart of %s is %+v, want reason done", stopped, last)
			}
			tr.note("%s's mysqld restarted once by the kubelet", stopped)
			return nil
		},
		expect: checker.Expect{MaxOutage: 5 * time.Second},
	}.run(t)
}

// serverRestarts is the restart count of p's server container.
func serverRestarts(p corev1.Pod) int32 {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "mariadb" {
			return st.RestartCount
		}
	}
	return 0
}
