package onnode

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The deployment as applied: 3 pods Running and Ready, one primary, the
// primary Service's EndpointSlice naming it, writes through its ClusterIP
// (kube-proxy) acknowledged and readable on both replicas, which refuse
// writes of their own.
func TestDeployServesWritesThroughThePrimaryService(t *testing.T) {
	c := deployed(t)
	ctx := context.Background()
	primary := c.waitHealthy(time.Minute)
	t.Logf("primary %s at %s; primary Service ClusterIP %s", primary.Name, primary.Status.PodIP, c.primaryIP)

	w := c.startWriter(time.Now().UnixNano() / 1000)
	deadline := time.Now().Add(30 * time.Second)
	for w.count() < 50 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	acked := w.Stop()
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged through %s in 30s", len(acked), c.primaryIP)
	}
	c.waitAllHave(acked, 30*time.Second)
	for _, p := range c.pods(ctx) {
		if p.Name == primary.Name {
			continue
		}
		db := c.open(p.Status.PodIP)
		_, err := db.ExecContext(ctx, "INSERT INTO w (id) VALUES (?)", -time.Now().UnixNano())
		db.Close()
		if err == nil {
			t.Errorf("replica %s accepted an application write", p.Name)
		}
	}
	fmt.Printf("onnode: %d writes through the primary Service, on all 3 members\n", len(acked))
}
