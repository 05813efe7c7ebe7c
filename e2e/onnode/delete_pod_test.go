package onnode

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// Graceful deletion of the primary pod, as a drain or kubectl delete does:
// its agent hands over to the best replica, which catches up first, so
// nothing is lost; the pod comes back with its volume's data and follows
// the new primary.
func TestPrimaryPodDeletion(t *testing.T) {
	scenario{
		name:   "graceful deletion of the primary pod",
		leader: otherLeader,
		inject: func(tr *trial) error {
			return tr.c.client.CoreV1().Pods(namespace).Delete(context.Background(), tr.primary.Name, metav1.DeleteOptions{})
		},
		expect: checker.Expect{MaxOutage: 15 * time.Second},
		target: 1 * time.Second,
	}.run(t)
}
