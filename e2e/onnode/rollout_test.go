package onnode

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A rolling update of the StatefulSet (an agent argument changes) restarts
// every pod, the primary's included: its agent hands over when it gets
// SIGTERM, so the update ends with switchovers, not a failover, and a
// client writing through the primary Service all along loses nothing. The
// primary is moved to the highest ordinal first: the update restarts it
// first, and then most often the member it handed over to, while the
// member it restarted first is still catching up.
func TestRollingUpdateLosesNothing(t *testing.T) {
	c := deployed(t)
	ctx := context.Background()
	first := members[len(members)-1]
	if c.waitHealthy(3*time.Minute).Name != first {
		cmd, err := agentctl(c, "switchover", "--to="+first, "--force", "--wait", "--wait-timeout=60s")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("agentctl switchover --to=%s: %v\n%s", first, err, out)
		}
	}
	old := c.waitHealthy(3 * time.Minute)
	if err := c.awaitCaughtUp(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
	before := len(c.history(ctx))

	sts, err := c.client.AppsV1().StatefulSets(namespace).Get(ctx, clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agent := -1
	for i, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == "agent" {
			agent = i
		}
	}
	if agent < 0 {
		t.Fatal("no agent container in the StatefulSet")
	}
	cl := c.startClients(true)
	defer cl.stop() // on a failure
	agentLogs := followAgents(c)
	defer agentLogs()
	w := cl.w
	time.Sleep(time.Second)
	began := time.Now()
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/template/spec/containers/%d/args/-","value":"--log-level=debug"}]`, agent)
	if _, err := c.client.AppsV1().StatefulSets(namespace).Patch(ctx, clusterName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, 10*time.Minute)
	c.waitHealthy(3 * time.Minute)
	took := time.Since(began)
	time.Sleep(time.Second)
	acked := w.Stop()
	c.waitAllHave(acked, 2*time.Minute)
	c.checkBooks(t, cl, "the rolling update")

	var switchovers, failovers int
	for _, e := range c.history(ctx)[before:] {
		t.Logf("history: %s %s -> %s: %s", e.Kind, e.From, e.To, e.Reason)
		switch e.Kind {
		case "switchover":
			switchovers++
		case "failover":
			failovers++
		}
	}
	t.Logf("verdict: rolling update of 3 pods took %s; old primary %s; %d acknowledged writes, none lost; longest write gap %s; %d switchover(s), %d failover(s)",
		ms(took), old.Name, len(acked), ms(w.longestGap()), switchovers, failovers)
	fmt.Printf("onnode: rolling update: %d acknowledged writes through the primary Service, 0 lost, longest write gap %s\n", len(acked), ms(w.longestGap()))
	if failovers > 0 || switchovers == 0 || old.Name != first {
		t.Logf("the agents' hand-over lines:\n%s", agentLogs())
		t.Errorf("the update made %d failover(s) and %d switchover(s): the primary must hand over before its pod restarts", failovers, switchovers)
	}
}

func waitRolledOut(t *testing.T, c *cluster, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	start, deadline := time.Now(), time.Now().Add(timeout)
	var progress string
	for {
		s, err := c.client.AppsV1().StatefulSets(namespace).Get(ctx, clusterName, metav1.GetOptions{})
		if err == nil {
			// Where a rolling update's time goes: each pod's restart.
			if p := fmt.Sprintf("%d updated, %d ready", s.Status.UpdatedReplicas, s.Status.ReadyReplicas); p != progress {
				progress = p
				t.Logf("+%s rollout: %s", ms(time.Since(start)), p)
			}
			if rolledOut(s) {
				return
			}
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("StatefulSet not rolled out within %s: %+v", timeout, s.Status)
			c.dump(ctx, msg)
			t.Fatal(msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func rolledOut(s *appsv1.StatefulSet) bool {
	return s.Status.ObservedGeneration >= s.Generation && s.Status.UpdateRevision == s.Status.CurrentRevision &&
		s.Status.UpdatedReplicas == *s.Spec.Replicas && s.Status.ReadyReplicas == *s.Spec.Replicas
}

// The PodDisruptionBudget allows one member down at a time: with a replica
// already gone, the eviction of another is refused.
func TestEvictionBlockedByPDB(t *testing.T) {
	c := deployed(t)
	ctx := context.Background()
	primary := c.waitHealthy(3 * time.Minute)
	var replicas []string
	for _, p := range c.pods(ctx) {
		if p.Name != primary.Name {
			replicas = append(replicas, p.Name)
		}
	}
	// The disruption controller must have counted 3 healthy pods first.
	waitFor(t, 30*time.Second, "the PDB to allow one disruption", func() bool {
		l, err := c.client.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].Status.DisruptionsAllowed == 1
	})
	evict := func(name string) error {
		return c.client.PolicyV1().Evictions(namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})
	}
	if err := evict(replicas[0]); err != nil {
		t.Fatalf("evicting %s with all members healthy: %v", replicas[0], err)
	}
	err := evict(replicas[1])
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s while %s is gone: %v, want 429 Too Many Requests from the PDB", replicas[1], replicas[0], err)
	}
	t.Logf("eviction of %s refused while %s is down: %v", replicas[1], replicas[0], err)
	c.waitHealthy(3 * time.Minute)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// followAgents keeps every incarnation's agent log of each pod while a
// rolling update replaces them (a replaced pod's log goes with it); the
// returned function stops and returns the lines that tell a hand-over's
// story, for a failure message.
func followAgents(c *cluster) (stop func() string) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu    sync.Mutex
		lines []string
		seen  = map[string]bool{}
		wg    sync.WaitGroup
	)
	for _, p := range c.pods(ctx) {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			var started time.Time
			for ctx.Err() == nil {
				// Not at once after a stream ended: while the pod
				// terminates, its exited container's log would be read
				// whole again and again.
				if !started.IsZero() {
					time.Sleep(500 * time.Millisecond)
				}
				started = time.Now()
				rc, err := c.client.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{Container: "agent", Follow: true}).Stream(ctx)
				if err != nil {
					continue
				}
				sc := bufio.NewScanner(rc)
				for sc.Scan() {
					// A stream that ended is opened again, from its start
					// while the old container's log is still there.
					l := name + ": " + sc.Text()
					if strings.Contains(l, "decision") || strings.Contains(l, "switchover") || strings.Contains(l, "hand") ||
						strings.Contains(l, "releas") || strings.Contains(l, "stopp") {
						mu.Lock()
						if !seen[l] {
							seen[l] = true
							lines = append(lines, l)
						}
						mu.Unlock()
					}
				}
				rc.Close()
			}
		}(p.Name)
	}
	return func() string {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}
