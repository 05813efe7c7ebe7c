package onnode

import (
	"context"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/fault"
)

// kill -9 of every process of the primary pod, its sandbox's included: the
// kubelet makes a new sandbox (a new pod IP) and restarts both containers
// on the same data. Once the kubelet reports every container of the pod
// stopped, the best replica takes the lock over without waiting for its
// ttl and promotes; the restarted old primary rejoins as a replica.
// Async replication may lose the writes acknowledged in the last moment
// before the kill that had not reached a replica (docs/fault-scenarios.md,
// "What can be lost"); the checker counts them.
func TestKillPrimaryPod(t *testing.T) {
	scenario{
		name:   "kill -9 of the primary pod",
		leader: anyLeader,
		inject: func(tr *trial) error {
			pids, err := tr.c.node.PodPIDs(context.Background(), namespace, tr.primary.Name)
			if err != nil {
				return err
			}
			for _, pid := range pids {
				_ = fault.Kill(pid) // some exit as the others die
			}
			return nil
		},
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 30 * time.Second},
		target: 5 * time.Second,
	}.run(t)
}
