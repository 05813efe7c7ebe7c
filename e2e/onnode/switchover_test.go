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
