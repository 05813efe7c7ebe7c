package onnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A member loses its data (its pod is deleted: the test overlay keeps the
// data in an emptyDir) after the primary purged the binary logs it would
// need, so replication alone cannot bring it back (error 1236). Its agent
// rebuilds it by itself from a donor's mariabackup stream once reseed_after
// has passed (set to 10 s here; 5 min by default), while the application
// keeps writing; afterwards every member holds every acknowledged row, and
// the history names the automatic rebuild. (agentctl reinit, the same
// rebuild asked for by a person, is tried in e2e's TestReinitEmptyMemberAfterPurge.)
func TestReseedMemberAfterPurge(t *testing.T) {
	c := deployed(t)
	// Nothing brings the purged history back: a member a later test
	// recreates empty could not catch up by replication.
	c.spoil("purged the primary's binary logs")
	setConfig(t, c, "reseed_after=10s")
	defer setConfig(t, c, "reseed_after=5m")
	ctx := context.Background()
	primary := c.waitHealthy(3 * time.Minute)
	if err := c.awaitCaughtUp(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, p := range c.pods(ctx) {
		if p.Name != primary.Name {
			victim = p.Name
		}
	}
	cl := c.startClients(true)
	defer cl.stop() // on a failure
	w := cl.w
	time.Sleep(2 * time.Second)
	purgeBinlogs(t, c, primary.Name)

	old := c.podNamed(ctx, victim)
	if err := c.client.CoreV1().Pods(namespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	broken, err := awaitBroken(c, victim, old.UID, 4*time.Minute)
	if err != nil {
		c.dump(ctx, err.Error())
		t.Fatal(err)
	}
	brokenAt := time.Now()
	t.Logf("%s came back empty and cannot catch up: %s", victim, broken)

	var rebuilt historyEntry
	for deadline := time.Now().Add(5 * time.Minute); rebuilt.Kind == "" && time.Now().Before(deadline); time.Sleep(time.Second) {
		for _, e := range c.history(ctx) {
			if e.Kind == "reinit" && e.To == victim {
				rebuilt = e
			}
		}
	}
	took := time.Since(brokenAt)
	if !strings.HasPrefix(rebuilt.Reason, "automatic rebuild from ") || !strings.Contains(rebuilt.Reason, "error 1236") ||
		!strings.HasSuffix(rebuilt.Reason, ": done") {
		msg := fmt.Sprintf("no automatic rebuild of %s in the history within 5 min of its break (last entry %+v)", victim, rebuilt)
		c.dump(ctx, msg)
		t.Fatal(msg)
	}
	t.Logf("%s rebuilt by its agent %s after it reported the break: %s", victim, ms(took), rebuilt.Reason)

	time.Sleep(2 * time.Second)
	acked := w.Stop()
	c.waitHealthy(2 * time.Minute)
	c.waitAllHave(acked, 2*time.Minute)
	c.checkBooks(t, cl, "the rebuild")
	p := c.podNamed(ctx, victim)
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "mariadb" && st.RestartCount != 1 {
			t.Errorf("%s's server container restarted %d times, want once (the swap)", victim, st.RestartCount)
		}
	}
	t.Logf("verdict: %s re-seeded by itself %s after its break: it holds all %d acknowledged writes, before and after the purge",
		victim, ms(took), len(acked))
}

// purgeBinlogs leaves the primary with only its current binary log.
// MariaDB keeps a log a replica still reads, so it retries until the
// replicas have moved on.
func purgeBinlogs(t *testing.T, c *cluster, primary string) {
	t.Helper()
	ctx := context.Background()
	if out, err := c.execSQL(ctx, primary, "FLUSH BINARY LOGS"); err != nil {
		t.Fatalf("FLUSH BINARY LOGS on %s: %v\n%s", primary, err, out)
	}
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		out, err := c.execSQL(ctx, primary, "PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY")
		if err != nil && !strings.Contains(out, "in use") {
			t.Fatalf("PURGE BINARY LOGS on %s: %v\n%s", primary, err, out)
		}
		if out, err = c.execSQL(ctx, primary, "SHOW BINARY LOGS"); err != nil {
			t.Fatalf("SHOW BINARY LOGS on %s: %v\n%s", primary, err, out)
		}
		// A header line and the one log left.
		if last = out; len(strings.Split(strings.TrimSpace(out), "\n")) == 2 {
			return
		}
	}
	t.Fatalf("%s keeps more than one binary log:\n%s", primary, last)
}

// awaitBroken waits for member's new pod (not uid) to report its
// replication broken in agentctl status, and returns that state.
func awaitBroken(c *cluster, member string, uid types.UID, timeout time.Duration) (string, error) {
	ctx := context.Background()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Second) {
		p, err := c.client.CoreV1().Pods(namespace).Get(ctx, member, metav1.GetOptions{})
		if err != nil || p.UID == uid {
			continue
		}
		states, err := memberStates(c)
		if err != nil {
			continue
		}
		if last = states[member]; strings.HasPrefix(last, "broken") {
			return last, nil
		}
	}
	return "", fmt.Errorf("%s never reported its replication broken within %s (last state %q)", member, timeout, last)
}
