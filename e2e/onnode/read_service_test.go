package onnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// A replica that falls behind by more than maximum_lag_for_reads (5 s here)
// leaves the read Service: its agent makes its pod not Ready, and the
// EndpointSlice controller drops it. The other replica stays in, and so
// does the primary in its own Service. Once the delay is lifted and the
// replica has caught up, it returns. The delay is the server's own
// (MASTER_DELAY), as an operator keeps a delayed replica.
func TestDelayedReplicaLeavesTheReadService(t *testing.T) {
	c := deployed(t)
	setConfig(t, c, "maximum_lag_for_reads=5s")
	defer setConfig(t, c, "maximum_lag_for_reads=30s")
	const delay = 20 // seconds, well past the bound
	var delayed corev1.Pod
	scenario{
		name:   "a replica delayed beyond maximum_lag_for_reads",
		leader: sameLeader,
		inject: func(tr *trial) error {
			delayed = tr.replicas[0]
			if err := setSourceDelay(tr, delayed, delay); err != nil {
				return err
			}
			tr.at = time.Now()
			others := []string{tr.replicas[1].Status.PodIP}
			took, err := tr.c.awaitReadEndpoints(others, 60*time.Second)
			if err != nil {
				return fmt.Errorf("with %s %d s behind: %w", delayed.Name, delay, err)
			}
			tr.note("%s, %d s behind, left the read Service %s after its delay began", delayed.Name, delay, ms(took))
			if why := tr.c.podEvent(delayed.Name, "ReadsOff"); why == "" {
				tr.fail("no ReadsOff Event on %s", delayed.Name)
			} else {
				tr.note("its Event: %s", why)
			}
			return nil
		},
		repair: func(tr *trial) error {
			if err := setSourceDelay(tr, delayed, 0); err != nil {
				return err
			}
			all := []string{tr.replicas[0].Status.PodIP, tr.replicas[1].Status.PodIP}
			took, err := tr.c.awaitReadEndpoints(all, 60*time.Second)
			if err != nil {
				return fmt.Errorf("after the delay was lifted: %w", err)
			}
			tr.note("back %s after the delay was lifted", ms(took))
			return nil
		},
		expect: checker.Expect{MaxOutage: 3 * time.Second},
	}.run(t)
}

// setSourceDelay sets pod's replication delay (MASTER_DELAY), as root over
// its socket. Its receiver is stopped for the change and started again at
// once, within the loop_wait its agent leaves a stopped one alone.
func setSourceDelay(tr *trial, pod corev1.Pod, seconds int) error {
	pid, err := tr.pid(pod, "mariadb")
	if err != nil {
		return err
	}
	db := openSocket(pid, 5*time.Second)
	defer db.Close()
	ctx := context.Background()
	for _, stmt := range []string{"STOP SLAVE", fmt.Sprintf("CHANGE MASTER TO MASTER_DELAY=%d", seconds), "START SLAVE"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s on %s: %w", stmt, pod.Name, err)
		}
	}
	return nil
}

// awaitReadEndpoints waits until the read Service's ready addresses are
// exactly want, and says how long that took.
func (c *cluster) awaitReadEndpoints(want []string, timeout time.Duration) (time.Duration, error) {
	want = slices.Sorted(slices.Values(want))
	start := time.Now()
	var got []string
	err := poll(timeout, fmt.Sprintf("the read Service's endpoints to be %v", want), func() bool {
		got = c.endpoints(context.Background(), clusterName+"-replicas")
		return slices.Equal(got, want)
	})
	if err != nil {
		return 0, fmt.Errorf("%w (they were %v)", err, got)
	}
	return time.Since(start), nil
}

// podEvent is the message of the newest Event with reason on pod; "" when
// there is none.
func (c *cluster) podEvent(pod, reason string) string {
	l, err := c.client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	newest := slices.MaxFunc(l.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	return newest.Message
}
