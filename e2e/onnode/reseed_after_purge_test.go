package onnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mysqlha/mysqlha/e2e/fault"
)

// A member loses its data (its claim, its pod and its volume's data are
// deleted, as an operator replaces a broken volume) after the primary
// purged the binary logs it would need, so replication alone cannot bring
// it back (error 1236). Its agent rebuilds it by itself from a donor's
// mariabackup stream once reseed_after has passed (set to 10 s here; 5 min
// by default), while the application keeps writing; afterwards every member
// holds every acknowledged row, and the history names the automatic
// rebuild. (agentctl reinit, the same rebuild asked for by a person, is
// tried in e2e's TestReinitEmptyMemberAfterPurge.)
func TestReseedMemberAfterPurge(t *testing.T) {
	reseedAfterPurge(t, "came back empty", true, func(c *cluster, primary, victim string) error {
		purgeBinlogs(t, c, primary, "")
		return c.wipeMember(context.Background(), victim)
	})
}

// A replica is down (cut off from everything) while the application writes
// and its source purges the binary logs holding what it has not received.
// Back, it keeps its data but cannot catch up (error 1236), and is
// re-seeded by itself as above.
func TestReseedReplicaDownDuringPurge(t *testing.T) {
	reseedAfterPurge(t, "was down during the purge", false, func(c *cluster, primary, victim string) error {
		ctx := context.Background()
		ns, err := c.node.PodNetns(ctx, namespace, victim)
		if err != nil {
			return err
		}
		faults := &fault.Injector{}
		defer faults.HealAll()
		if _, err := faults.Isolate(ns); err != nil {
			return err
		}
		// Writes the replica does not receive: the clients', and one of our
		// own, should the clients be stalled (a primary flushing a large
		// load, say).
		if out, err := c.execSQL(ctx, primary, "CREATE TABLE IF NOT EXISTS app.missed (n INT); INSERT INTO app.missed VALUES (1)"); err != nil {
			return fmt.Errorf("writing on %s: %v\n%s", primary, err, out)
		}
		time.Sleep(2 * time.Second)
		// Both ends of the cut replica's session linger until TCP gives up,
		// and what the source had sent into it would arrive after the heal:
		// end the receiver (over its socket, which the cut leaves alone),
		// and the source's side (purgeBinlogs), which keeps a log in use.
		db, err := c.rootDB(ctx, victim, 5*time.Second)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			return fmt.Errorf("stopping the receiver of %s: %w", victim, err)
		}
		purgeBinlogs(t, c, primary, c.podNamed(ctx, victim).Status.PodIP)
		return faults.HealAll()
	})
}

// reseedAfterPurge runs lose, which makes a replica miss binary logs the
// primary purges, under the write load, and checks that the replica's
// agent re-seeds it by itself and that nothing is lost; replaced: lose
// replaces the replica's pod. It runs -onnode.trials trials (a purged
// cluster can be purged again) and reports the time from the fault to a
// healthy cluster.
func reseedAfterPurge(t *testing.T, how string, replaced bool, lose func(c *cluster, primary, victim string) error) {
	c := deployed(t)
	// Nothing brings the purged history back: a member a later test
	// wipes could not catch up by replication.
	c.spoil("purged the primary's binary logs")
	setConfig(t, c, "reseed_after=10s")
	defer setConfig(t, c, "reseed_after=5m")
	dataMB := c.ensureData(t)
	var healthy []time.Duration
	for n := 1; n <= *flagTrials; n++ {
		healthy = append(healthy, reseedTrial(t, c, n, how, replaced, lose, dataMB))
	}
	t.Logf("re-seed of a member that %s, database %d MB, %d trials: fault to a healthy cluster p50 %ss, max %ss",
		how, dataMB, len(healthy), pct(healthy, 0.5), pct(healthy, 1))
}

// reseedTrial is one trial of reseedAfterPurge; it returns the time from
// the fault to a healthy cluster.
func reseedTrial(t *testing.T, c *cluster, n int, how string, replaced bool, lose func(c *cluster, primary, victim string) error, dataMB int) time.Duration {
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
	rebuilds := func() []historyEntry {
		var out []historyEntry
		for _, e := range c.history(ctx) {
			if e.Kind == "reinit" && e.To == victim {
				out = append(out, e)
			}
		}
		return out
	}
	before := len(rebuilds())
	cl := c.startClients(true)
	defer cl.stop() // on a failure
	w := cl.w
	time.Sleep(2 * time.Second)

	old := c.podNamed(ctx, victim)
	faultAt := time.Now()
	if err := lose(c, primary.Name, victim); err != nil {
		t.Fatal(err)
	}
	var oldUID types.UID
	restartsBefore := serverRestarts(old)
	if replaced {
		oldUID, restartsBefore = old.UID, 0
	}
	broken, err := awaitBroken(c, victim, oldUID, 4*time.Minute)
	if err != nil {
		c.dump(ctx, err.Error())
		t.Fatal(err)
	}
	brokenAt := time.Now()
	t.Logf("trial %d: %s %s and cannot catch up: %s", n, victim, how, broken)

	var rebuilt historyEntry
	for deadline := time.Now().Add(5 * time.Minute); rebuilt.Kind == "" && time.Now().Before(deadline); time.Sleep(time.Second) {
		if r := rebuilds(); len(r) > before {
			rebuilt = r[len(r)-1]
		}
	}
	took := time.Since(brokenAt)
	if !strings.HasPrefix(rebuilt.Reason, "automatic rebuild from ") || !strings.Contains(rebuilt.Reason, "error 1236") ||
		!strings.HasSuffix(rebuilt.Reason, ": done") {
		msg := fmt.Sprintf("trial %d: no automatic rebuild of %s in the history within 5 min of its break (last entry %+v)", n, victim, rebuilt)
		c.dump(ctx, msg)
		t.Fatal(msg)
	}
	t.Logf("trial %d: %s rebuilt by its agent %s after it reported the break: %s", n, victim, ms(took), rebuilt.Reason)

	c.waitHealthy(2 * time.Minute)
	healthy := time.Since(faultAt)
	time.Sleep(2 * time.Second)
	acked := w.Stop()
	c.waitAllHave(acked, 2*time.Minute)
	c.checkBooks(t, cl, "the rebuild")
	if n := serverRestarts(c.podNamed(ctx, victim)) - restartsBefore; n != 1 {
		t.Errorf("%s's server container restarted %d times, want once (the swap)", victim, n)
	}
	t.Logf("verdict: trial %d: %s re-seeded by itself %s after its break, healthy again %s after the fault, database %d MB: "+
		"it holds all %d acknowledged writes, before and after the purge", n, victim, ms(took), ms(healthy), dataMB, len(acked))
	return healthy
}

// purgeBinlogs leaves the primary with only its current binary log.
// MariaDB keeps a log a replica still reads, so it retries until the
// replicas have moved on; evict, when not "", is the address of a cut
// replica whose sessions it ends before each try (a killed session that
// was blocked writing to it can linger, and a new one can appear).
func purgeBinlogs(t *testing.T, c *cluster, primary, evict string) {
	t.Helper()
	ctx := context.Background()
	if out, err := c.execSQL(ctx, primary, "FLUSH BINARY LOGS"); err != nil {
		t.Fatalf("FLUSH BINARY LOGS on %s: %v\n%s", primary, err, out)
	}
	var last string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if evict != "" {
			killDumpThreads(t, c, primary, evict)
		}
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
	sessions, _ := c.execSQL(ctx, primary, "SELECT ID, HOST, COMMAND, TIME, STATE FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
	t.Fatalf("%s keeps more than one binary log:\n%s\nits binary log sessions:\n%s", primary, last, sessions)
}

// awaitBroken waits for member to report its replication broken in
// agentctl status, and returns that state; with uid set, on a pod other
// than uid only (a replaced member's new pod).
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

// killDumpThreads ends the primary's binary log sessions of the replica at
// ip.
func killDumpThreads(t *testing.T, c *cluster, primary, ip string) {
	t.Helper()
	ctx := context.Background()
	out, err := c.execSQL(ctx, primary, fmt.Sprintf(
		"SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%%' AND HOST LIKE '%s:%%'", ip))
	if err != nil {
		t.Fatalf("listing the binary log sessions on %s: %v\n%s", primary, err, out)
	}
	for _, line := range strings.Fields(out) {
		if _, err := strconv.ParseUint(line, 10, 64); err != nil {
			continue // the header
		}
		if out, err := c.execSQL(ctx, primary, "KILL "+line); err != nil && !strings.Contains(out, "Unknown thread") {
			t.Fatalf("KILL %s on %s: %v\n%s", line, primary, err, out)
		}
	}
}
