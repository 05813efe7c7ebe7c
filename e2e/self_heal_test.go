package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/backup"
)

// After a hard failover the old primary comes back holding a transaction
// no other member has: what an asynchronous failover leaves behind when a
// client's write reached only the old primary. (It is written here as root
// on the restarted old primary, before its agent starts, so that the test
// does not race the replicas' receivers for it.) With rebuild_diverged=auto,
// the default, its agent saves that transaction to a file in its data
// directory, rebuilds the member from a donor, and follows the new
// primary; the history says so with the file's name, and the file, replayed
// on the primary, applies the lost write as a new transaction.
func TestDivergedOldPrimaryHeals(t *testing.T) {
	c := NewCluster(t, Options{AgentArgs: []string{"--rebuild-diverged=auto"}})
	old := c.Bootstrap()
	newPrimary := hardFailover(t, c, old)

	old.RestartMySQL()
	const lost = "acknowledged-by-the-old-primary-alone"
	// An id of its own: an AUTO_INCREMENT id the new primary has reused
	// since would make the replay fail with a duplicate key, which a
	// person then resolves by hand (README, "Self-healing").
	if _, err := old.root.Exec("INSERT INTO app.e2e (id, tag) VALUES (1000000, ?)", lost); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restarts := superviseMySQL(ctx, t, old)
	healStart := time.Now()
	old.StartAgent()

	var entry historyEntry
	waitFor(t, 3*time.Minute, "the automatic rebuild of "+old.Name+" in the history", func() (bool, string) {
		var ok bool
		entry, ok = c.historyEntry("reinit", old.Name)
		return ok, fmt.Sprintf("/status of %s: %s", old.Name, old.Status())
	})
	took := time.Since(healStart)
	if !strings.Contains(entry.Reason, "automatic rebuild from ") || !strings.Contains(entry.Reason, "saved to ") ||
		!strings.HasSuffix(entry.Reason, ": done") {
		t.Fatalf("history reason %q, want an automatic rebuild, the saved file, done", entry.Reason)
	}
	c.WaitRejoined(60*time.Second, old, newPrimary)
	if old.HasRow(lost) {
		t.Fatalf("%s still holds %q after its rebuild", old.Name, lost)
	}
	cancel()
	if n := <-restarts; n != 1 {
		t.Errorf("mysqld of %s was restarted %d times, want once (the swap)", old.Name, n)
	}

	saved, err := filepath.Glob(filepath.Join(old.Server.Dir, "data", backup.SavedPrefix+"*.sql"))
	if err != nil || len(saved) != 1 {
		t.Fatalf("saved files in %s's data directory: %v %v, want one", old.Name, saved, err)
	}
	if !strings.Contains(entry.Reason, saved[0]) {
		t.Errorf("history reason %q does not name the saved file %s", entry.Reason, saved[0])
	}
	body, err := os.ReadFile(saved[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), lost) {
		t.Fatalf("the saved file %s lacks the lost row %q:\n%s", saved[0], lost, body)
	}

	// A person replays it on the primary: the write is back, everywhere.
	replay := exec.Command("mariadb", "--socket="+newPrimary.Server.Socket, "-uroot")
	replay.Stdin = strings.NewReader(string(body))
	if out, err := replay.CombinedOutput(); err != nil {
		t.Fatalf("replaying %s on %s: %v\n%s", saved[0], newPrimary.Name, err, out)
	}
	c.WriteAndReplicate(newPrimary, "after-the-replay")
	for _, m := range c.Members {
		if !m.HasRow(lost) {
			t.Errorf("%s lacks the replayed row %q", m.Name, lost)
		}
	}
	t.Logf("verdict: %s diverged by one transaction, saved it to %s and was rebuilt %v after its agent started; "+
		"replayed, the row is on every member", old.Name, filepath.Base(saved[0]), took.Round(time.Millisecond))
}

type historyEntry struct{ Kind, From, To, Reason string }

// historyEntry is the newest `agentctl history` entry of kind naming to.
func (c *Cluster) historyEntry(kind, to string) (historyEntry, bool) {
	r := c.Ctl("history", "-o", "json")
	var entries []historyEntry
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &entries) != nil {
		return historyEntry{}, false
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Kind == kind && e.To == to {
			return e, true
		}
	}
	return historyEntry{}, false
}
