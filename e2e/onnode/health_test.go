package onnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every test takes the shared cluster through deployed, which checks it
// first, and gives it back through hand back: a test stands alone, in any
// order, and a test that breaks the cluster pays for the repair itself.

// spoil marks the cluster as changed in a way later tests cannot live
// with (purged binary logs: a member wiped could not catch up);
// the test that spoils it recreates it when it ends.
func (c *cluster) spoil(why string) { c.spoiled = why }

// gate is deployed's check: a cluster that is not healthy and caught up
// within timeout is recreated.
func (c *cluster) gate(timeout time.Duration) error {
	if err := c.check(timeout); err != nil {
		return c.startOver(fmt.Sprintf("%s found it unhealthy: %v", c.t.Name(), err))
	}
	return nil
}

// handBack runs when a test ends: a spoiled or unhealthy cluster is
// recreated now, on the test's own time. A test that passed but left the
// cluster unhealthy broke its own promise, and fails.
func (c *cluster) handBack(t *testing.T) {
	why := c.spoiled
	if why == "" {
		timeout := 2 * time.Minute
		if t.Failed() {
			timeout = 30 * time.Second
		}
		if err := c.check(timeout); err != nil {
			why = fmt.Sprintf("left unhealthy: %v", err)
			if !t.Failed() {
				msg := fmt.Sprintf("%s left the cluster unhealthy: %v", t.Name(), err)
				c.dump(context.Background(), msg)
				t.Error(msg)
			}
		}
	}
	if why == "" {
		return
	}
	if err := c.startOver(fmt.Sprintf("%s %s", t.Name(), why)); err != nil {
		t.Errorf("recreating the cluster after %s: %v", t.Name(), err)
	}
}

// check: three Ready pods, one primary routed, no member errant or with
// its replication broken, every GTID position the same.
func (c *cluster) check(timeout time.Duration) error {
	if _, err := c.awaitHealthy(timeout); err != nil {
		return err
	}
	if states, err := memberStates(c); err == nil {
		for name, s := range states {
			if s == "errant" || len(s) >= 6 && s[:6] == "broken" {
				return fmt.Errorf("%s is %s", name, s)
			}
		}
	}
	return c.awaitCaughtUp(timeout)
}

// startOver starts the cluster over: the members and their data go (their
// volumes are emptied), so do the Leases that hold the lock
// and the member records, and the deployment is applied again and
// bootstraps as on first use. A cluster that cannot be recreated fails
// every later test at once.
func (c *cluster) startOver(why string) error {
	ctx := context.Background()
	logf("recreating the cluster: %s", why)
	began := time.Now()
	c.spoiled = ""
	err := c.wipe(ctx)
	if err == nil {
		err = c.apply(ctx, c.objects)
	}
	if err == nil {
		_, err = c.awaitHealthy(5 * time.Minute)
	}
	if err == nil {
		err = c.awaitCaughtUp(2 * time.Minute)
	}
	if err == nil {
		err = c.setTestConfig() // the wipe took the stored config along
	}
	if err != nil {
		c.broken = fmt.Errorf("recreating the cluster (%s): %w", why, err)
		return c.broken
	}
	logf("recreated the cluster in %s", ms(time.Since(began)))
	return nil
}

// wipe deletes the StatefulSet (its pods orphaned, so they are not
// recreated meanwhile), each pod with a one-second grace (its data goes
// anyway), waits until the kubelet has stopped them all, and only then
// empties their volumes and deletes the Leases: a running agent could
// otherwise write its record or take the lock again.
func (c *cluster) wipe(ctx context.Context) error {
	orphan := metav1.DeletePropagationOrphan
	err := c.client.AppsV1().StatefulSets(namespace).Delete(ctx, clusterName, metav1.DeleteOptions{PropagationPolicy: &orphan})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the StatefulSet: %w", err)
	}
	grace := int64(1)
	for _, p := range c.pods(ctx) {
		err := c.client.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s: %w", p.Name, err)
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); len(c.pods(ctx)) > 0; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pods still present 2m after their deletion: %s", c.look(ctx))
		}
	}
	if err := c.wipeVolumes(ctx); err != nil {
		return err
	}
	err = c.client.CoordinationV1().Leases(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("deleting the Leases: %w", err)
	}
	return nil
}

// setTestConfig stores what the scenarios run with beyond the deployment's
// defaults. A diverged member is left errant, for the scenarios to count
// and recreate (tr.recreate): rebuilt from a backup instead, its binary log
// would begin there, and once it led, a pod recreated empty could not
// catch up. A self-healing scenario switches auto on for its own run.
func (c *cluster) setTestConfig() error {
	cmd, err := agentctl(c, "set-config", "rebuild_diverged=report")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("agentctl set-config rebuild_diverged=report: %v\n%s", err, out)
	}
	return nil
}
