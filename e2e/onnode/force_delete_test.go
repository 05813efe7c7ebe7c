package onnode

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// kubectl delete --force --grace-period=0 of the primary pod: the API
// object goes at once and the StatefulSet makes a new pod of the same name
// while the node is still running the old containers, old agent and
// writable old server included. Two agents with one member name: the new
// one must not lead alongside the old (the duplicate-identity rule).
func TestPrimaryPodForceDeletion(t *testing.T) {
	scenario{
		name:   "forced deletion of the primary pod",
		leader: anyLeader,
		inject: func(tr *trial) error {
			zero := int64(0)
			return tr.c.client.CoreV1().Pods(namespace).Delete(context.Background(), tr.primary.Name,
				metav1.DeleteOptions{GracePeriodSeconds: &zero})
		},
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 30 * time.Second},
		target: 5 * time.Second,
	}.run(t)
}
