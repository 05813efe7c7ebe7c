package onnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/fault"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// The primary's node dies (kill -9 of every process of its pod, then the
// pod forced away) just after it acknowledged writes no replica received:
// their receivers were stopped a moment before, as a network blip does. A
// replica takes over; the old primary's new pod comes back on its
// PersistentVolume holding those writes, diverged. With
// rebuild_diverged=auto its agent saves them to a file on the volume,
// rebuilds the member from a donor and follows the new primary: three
// streaming members again, with no human step. The writes it alone held
// are lost to the cluster (async mode), and in the file.
func TestDivergedOldPrimaryHealsItself(t *testing.T) {
	c := deployed(t)
	// A member rebuilt from a backup has binary logs only from there on:
	// once it leads, a member a later test wipes could not catch up.
	c.spoil("a member rebuilt from a backup")
	setConfig(t, c, "rebuild_diverged=auto")
	defer setConfig(t, c, "rebuild_diverged=report")
	dataMB := c.ensureData(t)
	var old string
	scenario{
		name:        "the old primary back diverged on its volume heals itself",
		leader:      otherLeader,
		selfHealing: true,
		inject: func(tr *trial) error {
			old = tr.primary.Name
			ctx := context.Background()
			if out, err := tr.c.execSQL(ctx, old, "CREATE TABLE IF NOT EXISTS app.missed (n INT)"); err != nil {
				return fmt.Errorf("creating app.missed on %s: %v\n%s", old, err, out)
			}
			if err := tr.awaitReplicasHave("app.missed"); err != nil {
				return err
			}
			for _, r := range tr.replicas {
				if _, err := tr.c.execSQL(ctx, r.Name, "STOP SLAVE IO_THREAD"); err != nil {
					return fmt.Errorf("stopping the receiver of %s: %w", r.Name, err)
				}
			}
			// Writes only the primary takes: the clients', and one of our own
			// should the clients be stalled (a primary flushing a large load).
			if out, err := tr.c.execSQL(ctx, old, "INSERT INTO app.missed VALUES (1)"); err != nil {
				return fmt.Errorf("writing on %s: %v\n%s", old, err, out)
			}
			tr.at = time.Now()
			pids, err := tr.c.node.PodPIDs(ctx, namespace, old)
			if err != nil {
				return err
			}
			for _, pid := range pids {
				_ = fault.Kill(pid) // some exit as the others die
			}
			zero := int64(0)
			return tr.c.client.CoreV1().Pods(namespace).Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		},
		verify: func(tr *trial, now corev1.Pod) error {
			var rebuilt historyEntry
			_ = poll(3*time.Minute, "the rebuild of "+old, func() bool {
				for _, e := range tr.c.history(context.Background()) {
					if e.Kind == "reinit" && e.To == old && strings.HasSuffix(e.Reason, ": done") {
						rebuilt = e
					}
				}
				return rebuilt.Kind != ""
			}) // judged below, with what the history held
			if !strings.Contains(rebuilt.Reason, "automatic rebuild from ") || !strings.Contains(rebuilt.Reason, "saved to ") {
				return fmt.Errorf("no automatic rebuild of %s with a saved file in the history (last %+v)", old, rebuilt)
			}
			saved, err := filepath.Glob(filepath.Join(volumeDir(old), "mysqlha-saved-*.sql"))
			if err != nil || len(saved) == 0 {
				return fmt.Errorf("no saved file on %s's volume (%s): %v", old, volumeDir(old), err)
			}
			b, err := os.ReadFile(saved[len(saved)-1])
			if err != nil {
				return err
			}
			tr.note("database %d MB; %s rebuilt by its agent: %s; %s on its volume, %d bytes, %d rows inserted", dataMB, old,
				rebuilt.Reason, filepath.Base(saved[len(saved)-1]), len(b), strings.Count(string(b), "### INSERT INTO"))
			return replaySaved(tr, now, saved[len(saved)-1])
		},
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 30 * time.Second},
	}.run(t)
}

// replaySaved replays a saved file as a person checks one before touching
// the primary: on a scratch server that holds the application's schema
// (mariadb-dump --no-data from the primary), with the mariadb client as
// root. It must apply, and bring back every write the client was told
// succeeded and the cluster lacks: what async mode lost is in the file.
// (Replayed on the primary, its row images would also put back the bank's
// balances as they were then: README, "Self-healing", review it first.)
func replaySaved(tr *trial, primary corev1.Pod, file string) error {
	ctx := context.Background()
	pid, err := tr.pid(primary, "mariadb")
	if err != nil {
		return err
	}
	dump := exec.CommandContext(ctx, "mariadb-dump", "--no-data", "--skip-triggers", "--databases", "app", "-uroot",
		fmt.Sprintf("--socket=/proc/%d/root/run/mysqld/mysqld.sock", pid))
	dump.Env = append(os.Environ(), "MYSQL_PWD="+rootPassword)
	schema, err := dump.Output()
	if err != nil {
		return fmt.Errorf("mariadb-dump --no-data of %s: %w", primary.Name, err)
	}
	scratch := mysqltest.Start(tr.c.t, 1)[0]
	saved, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	// The scratch server holds the schema, not the rows the saved
	// transactions update (the bank's accounts): IDEMPOTENT passes over
	// those, and the inserts, the client's writes, apply.
	idempotent := []byte("SET GLOBAL slave_exec_mode = 'IDEMPOTENT';\n")
	for _, step := range []struct {
		what string
		sql  []byte
	}{{"the schema", schema}, {filepath.Base(file), append(idempotent, saved...)}} {
		load := exec.CommandContext(ctx, "mariadb", "-uroot", "--socket="+scratch.Socket)
		load.Stdin = bytes.NewReader(step.sql)
		if out, err := load.CombinedOutput(); err != nil {
			return fmt.Errorf("replaying %s on a scratch server: %v\n%s", step.what, err, out)
		}
	}
	lost, err := tr.c.missing(ctx, primary, tr.w.Stop())
	if err != nil {
		return err
	}
	have, err := writtenIDs(ctx, scratch.RootDB(tr.c.t), "app.w")
	if err != nil {
		return err
	}
	notSaved := absent(lost, have)
	if len(notSaved) > 0 {
		return fmt.Errorf("%d of the %d acknowledged writes the cluster lost are not in %s (first %v)",
			len(notSaved), len(lost), filepath.Base(file), notSaved[:min(5, len(notSaved))])
	}
	tr.note("replayed on a scratch server: all %d acknowledged writes the cluster lost are in it, with %d the client never saw acknowledged",
		len(lost), len(have)-len(lost))
	return nil
}

// awaitReplicasHave waits until every replica of the trial has table.
func (tr *trial) awaitReplicasHave(table string) error {
	ctx := context.Background()
	schema, name, _ := strings.Cut(table, ".")
	return poll(30*time.Second, "the replicas to have "+table, func() bool {
		for _, r := range tr.replicas {
			out, err := tr.c.execSQL(ctx, r.Name, fmt.Sprintf("SHOW TABLES FROM %s LIKE '%s'", schema, name))
			if err != nil || !strings.Contains(out, name) {
				return false
			}
		}
		return true
	})
}
