package onnode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// holder reads the leader Lease's holder.
func (c *cluster) holder(ctx context.Context) string {
	l, err := c.client.CoordinationV1().Leases(namespace).Get(ctx, clusterName+"-leader", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

type historyEntry struct{ Kind, From, To string }

// history reads the cluster's failover and switchover history.
func (c *cluster) history(ctx context.Context) []historyEntry {
	l, err := c.client.CoordinationV1().Leases(namespace).Get(ctx, clusterName+"-state", metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("reading the state Lease: %v", err)
	}
	var h []historyEntry
	if raw := l.Annotations["mysqlha.io/history"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			c.t.Fatalf("history annotation %q: %v", raw, err)
		}
	}
	return h
}

// phases of one primary change, from the moment the old primary's pod was
// deleted: detect (the lock names another member), promote (that member's
// mysqld is writable) and route (the primary Service's endpoints name it).
type phases struct{ detect, promote, route time.Duration }

// watchChange polls until a member other than old holds the lock, is
// writable, and is the primary Service's only endpoint.
func (c *cluster) watchChange(ctx context.Context, old string, since time.Time, timeout time.Duration) (string, phases) {
	c.t.Helper()
	var (
		ph       phases
		newName  string
		writable bool
	)
	deadline := since.Add(timeout)
	for time.Now().Before(deadline) {
		now := time.Now()
		if newName == "" {
			if h := c.holder(ctx); h != "" && h != old {
				newName, ph.detect = h, now.Sub(since)
			}
		}
		if newName != "" && !writable {
			if p, err := c.client.CoreV1().Pods(namespace).Get(ctx, newName, metav1.GetOptions{}); err == nil && p.Status.PodIP != "" {
				db := c.open(p.Status.PodIP)
				var ro int
				if err := db.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro); err == nil && ro == 0 {
					writable, ph.promote = true, now.Sub(since)
				}
				db.Close()
			}
		}
		if writable {
			p, err := c.client.CoreV1().Pods(namespace).Get(ctx, newName, metav1.GetOptions{})
			if err == nil && slices.Equal(c.primaryEndpoints(ctx), []string{p.Status.PodIP}) {
				ph.route = now.Sub(since)
				return newName, ph
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.dump(ctx)
	c.t.Fatalf("no complete change of primary from %s within %s: holder %q writable %v; %s", old, timeout, newName, writable, c.look(ctx))
	return "", ph
}

// Deleting the primary pod (gracefully, as a node drain or kubectl delete
// does): its agent hands over, a new primary serves writes through the same
// ClusterIP, and the deleted pod comes back, empty, as a replica with every
// row. -onnode.trials trials (3 in make test; make bench-node runs 10)
// under a steady write load; nothing acknowledged is lost.
func TestPrimaryPodDeletion(t *testing.T) {
	c := deployed(t)
	ctx := context.Background()
	trials := *flagTrials
	var all []phases
	var gaps []time.Duration
	for trial := 1; trial <= trials; trial++ {
		old := c.waitHealthy(3 * time.Minute)
		w := c.startWriter(time.Now().UnixNano() / 1000)
		time.Sleep(300 * time.Millisecond)
		deleted := time.Now()
		if err := c.client.CoreV1().Pods(namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		newName, ph := c.watchChange(ctx, old.Name, deleted, 60*time.Second)
		// The client's view: its first acknowledgement from the new primary,
		// through the same ClusterIP.
		var first time.Time
		for wait := time.Now().Add(10 * time.Second); first.IsZero() && time.Now().Before(wait); {
			time.Sleep(20 * time.Millisecond)
			first = w.firstAckAfter(deleted.Add(ph.promote))
		}
		acked := w.Stop()
		gaps = append(gaps, w.longestGap())
		t.Logf("trial %2d: %s -> %s detect %s promote %s route %s client %s; longest write gap %s; %d acked",
			trial, old.Name, newName, ms(ph.detect), ms(ph.promote), ms(ph.route), ms(first.Sub(deleted)), ms(w.longestGap()), len(acked))
		if first.IsZero() {
			t.Fatalf("trial %d: no write acknowledged through %s within 10s of %s becoming writable", trial, c.primaryIP, newName)
		}
		all = append(all, ph)
		c.waitHealthy(3 * time.Minute) // the deleted pod is back, a replica
		c.waitAllHave(acked, 2*time.Minute)
		if p := c.podNamed(ctx, old.Name); p.Labels[roleLabel] != "replica" {
			t.Errorf("trial %d: %s came back labelled %q, want replica", trial, old.Name, p.Labels[roleLabel])
		}
	}
	report(t, "pod-delete failover on the real node", all, gaps)
}

func (c *cluster) podNamed(ctx context.Context, name string) corev1.Pod {
	p, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return *p
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

func report(t *testing.T, what string, all []phases, gaps []time.Duration) {
	pick := func(f func(phases) time.Duration) []time.Duration {
		var out []time.Duration
		for _, p := range all {
			out = append(out, f(p))
		}
		slices.Sort(out)
		return out
	}
	slices.Sort(gaps)
	pct := func(s []time.Duration, p float64) string {
		if len(s) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", s[min(len(s)-1, int(float64(len(s))*p+0.5)-1)].Seconds())
	}
	d, pr, r := pick(func(p phases) time.Duration { return p.detect }), pick(func(p phases) time.Duration { return p.promote }),
		pick(func(p phases) time.Duration { return p.route })
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d trials; seconds from the pod deletion\n", what, len(all))
	fmt.Fprintf(&b, "  %-6s %8s %8s %8s %10s\n", "", "detect", "promote", "route", "write-gap")
	for _, row := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p95", 0.95}, {"max", 1}} {
		fmt.Fprintf(&b, "  %-6s %8s %8s %8s %10s\n", row.name, pct(d, row.p), pct(pr, row.p), pct(r, row.p), pct(gaps, row.p))
	}
	t.Log("\n" + b.String())
	fmt.Print(b.String())
}
