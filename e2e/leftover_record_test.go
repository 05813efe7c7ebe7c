package e2e

import (
	"testing"
	"time"
)

// TestLosslessLeftoverRecordDoesNotBlockPromotion: in lossless mode a
// member removed for good (its agent and mysqld gone, as a scaled-down
// StatefulSet leaves it) keeps a record on Kubernetes, stale; on etcd the
// record goes with its session lease. Once the primary has dropped it from
// its acknowledgers, a kill -9 of the primary is failed over as usual on
// both backends: the candidate does not wait for the removed member until
// its promotion bound (a minute), and the next candidate after it.
func TestLosslessLeftoverRecordDoesNotBlockPromotion(t *testing.T) {
	for _, kube := range []bool{false, true} {
		name := "etcd"
		if kube {
			name = "kubernetes"
		}
		t.Run(name, func(t *testing.T) {
			o := losslessOptions
			o.Kubernetes = kube
			c := NewCluster(t, o)
			old := c.Bootstrap()
			others := c.Others(old)
			survivor, removed := others[0], others[1]
			removed.KillAgent()
			removed.KillMySQL()
			c.WriteAndReplicate(old, "after-the-removal", removed)
			// The removed member's record goes stale after the member ttl
			// (30 s) on Kubernetes, and vanishes with its session lease on
			// etcd; the primary dropped it from its acknowledgers at once,
			// since the survivor streams all it may have acknowledged.
			// Staleness is judged on each observer's clock from when it
			// saw the record change, and no public surface shows the
			// agents' view of it: wait out the member ttl.
			time.Sleep(35 * time.Second)

			killed := time.Now()
			old.KillAgent()
			old.KillMySQL()
			waitFor(t, 30*time.Second, survivor.Name+" to become the writable primary", func() (bool, string) {
				st := survivor.Status()
				return st != nil && st.Writable, c.describe()
			})
			if !survivor.HasRow("after-the-removal") {
				t.Fatalf("%s became writable without the last acknowledged write", survivor.Name)
			}
			t.Logf("%s: %s writable %v after the kill -9 of %s, with %s's record left behind",
				name, survivor.Name, ms(time.Since(killed)), old.Name, removed.Name)
		})
	}
}
