package onnode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lock is the leader Lease's holder ("" when none, or unreadable) and when
// it acquired the lock.
func (c *cluster) lock(ctx context.Context) (string, time.Time) {
	l, err := c.client.CoordinationV1().Leases(namespace).Get(ctx, clusterName+"-leader", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", time.Time{}
	}
	var acquired time.Time
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	return *l.Spec.HolderIdentity, acquired
}

type historyEntry struct{ Kind, From, To, Reason string }

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

// phases of one primary change, from the moment the fault was injected:
// detect (the lock names another member), promote (that member's mysqld is
// writable) and route (the primary Service's endpoints name it alone).
type phases struct{ detect, promote, route time.Duration }

// awaitChange polls until a member other than old holds the lock, is
// writable, and is the primary Service's only endpoint. When the lock does
// not move within timeout, that is an error if must, else name is "". If
// not must, old taking the lock again (a new acquisition: it gave it up or
// lost it) is a change too, and the one it names.
func (c *cluster) awaitChange(ctx context.Context, old string, since time.Time, timeout time.Duration, must bool) (string, phases, error) {
	var (
		ph       phases
		newName  string
		writable bool
	)
	deadline := since.Add(timeout)
	_, firstAcquired := c.lock(ctx)
	for time.Now().Before(deadline) {
		now := time.Now()
		// The lock may move again before its holder serves (a cold start:
		// the old primary hands over to a member that is stopping too):
		// the change completes on its latest holder, the old one included
		// where the scenario allows it.
		h, acquired := c.lock(ctx)
		again := !must && h == old && !acquired.Equal(firstAcquired)
		if h != "" && h != newName && (h != old || again) {
			if newName == "" {
				ph.detect = now.Sub(since)
			}
			newName, writable = h, false
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
				return newName, ph, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if newName == "" && !must {
		return "", ph, nil
	}
	return "", ph, fmt.Errorf("no complete change of primary from %s within %s: holder %q writable %v; %s",
		old, timeout, newName, writable, c.look(ctx))
}

func (c *cluster) podNamed(ctx context.Context, name string) corev1.Pod {
	p, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return *p
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
