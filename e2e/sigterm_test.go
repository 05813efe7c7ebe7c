package e2e

import (
	"fmt"
	"testing"
	"time"
)

// SIGTERM of the primary's agent, as on pod deletion: the agent hands the
// lock to the best replica before it exits, so writes resume within
// seconds, well before the lock could have expired (ttl), and nothing
// acknowledged is lost.
func TestPrimaryAgentSIGTERMHandsOver(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-sigterm")

	stopped := time.Now()
	old.StopAgent()
	// A hand-over needs no expiry: allow less than ttl.
	limit := c.Timing.TTL - time.Second
	win := FirstWrite(c.Others(old), "after-sigterm", 20*time.Millisecond, limit)
	if win.Member == nil {
		t.Fatalf("no replica accepted a write within %v of SIGTERM to %s's agent (a hand-over should beat ttl %v)\n%s",
			limit, old.Name, c.Timing.TTL, c.describe())
	}
	t.Logf("%s accepted the first write %v after SIGTERM to %s's agent", win.Member.Name,
		win.At.Sub(stopped).Round(time.Millisecond), old.Name)
	if !win.Member.HasRow("before-sigterm") {
		t.Errorf("%s lacks the row acknowledged before the hand-over", win.Member.Name)
	}
	if ro, err := old.ReadOnly(); err != nil || !ro {
		t.Errorf("%s's mysqld after its agent stopped: read_only=%v err=%v, want read-only", old.Name, ro, err)
	}
	// The hand-over can take less time than a few reads: keep sampling for
	// about half a second after it (a read per member every 10 ms), so the
	// verdict also covers the moments right after the new primary's first
	// write.
	at := sb.Samples()
	waitFor(t, 5*time.Second, "the monitor to sample the aftermath", func() (bool, string) {
		n := sb.Samples()
		return n >= at+50*len(c.Members), fmt.Sprintf("%d reads since the first write", n-at)
	})
	sb.Stop()
	sb.ExpectAlive()
}
