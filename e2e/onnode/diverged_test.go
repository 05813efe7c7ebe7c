package onnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/fault"
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
	dataMB := c.ensureData(t)
	var old string
	scenario{
		name:        "the old primary back diverged on its volume heals itself",
		leader:      otherLeader,
		selfHealing: true,
		inject: func(tr *trial) error {
			old = tr.primary.Name
			for _, r := range tr.replicas {
				if _, err := tr.c.execSQL(context.Background(), r.Name, "STOP SLAVE IO_THREAD"); err != nil {
					return fmt.Errorf("stopping the receiver of %s: %w", r.Name, err)
				}
			}
			time.Sleep(100 * time.Millisecond) // writes only the primary takes
			tr.at = time.Now()
			pids, err := tr.c.node.PodPIDs(context.Background(), namespace, old)
			if err != nil {
				return err
			}
			for _, pid := range pids {
				_ = fault.Kill(pid) // some exit as the others die
			}
			zero := int64(0)
			return tr.c.client.CoreV1().Pods(namespace).Delete(context.Background(), old, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		},
		verify: func(tr *trial, now corev1.Pod) error {
			var rebuilt historyEntry
			for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
				for _, e := range tr.c.history(context.Background()) {
					if e.Kind == "reinit" && e.To == old && strings.HasSuffix(e.Reason, ": done") {
						rebuilt = e
					}
				}
				if rebuilt.Kind != "" {
					break
				}
			}
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
			return nil
		},
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 30 * time.Second},
	}.run(t)
	setConfig(t, c, "rebuild_diverged=report")
}
