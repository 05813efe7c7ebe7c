package onnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The old primary rejoins: its agent is frozen (SIGSTOP) for 15 s, long
// enough for a replica to take the expired lock, fence the old server and
// promote. Woken, the old agent still believes it leads for a moment: it
// must not make its server writable again, and it must follow the new
// primary, with every acknowledged write.
func TestOldPrimaryRejoins(t *testing.T) {
	scenario{
		name:   "the old primary rejoining",
		leader: otherLeader,
		hold:   15 * time.Second,
		inject: func(tr *trial) error {
			pid, err := tr.pid(tr.primary, "agent")
			if err != nil {
				return err
			}
			_, err = tr.faults.Freeze(pid)
			return err
		},
		verify: func(tr *trial, now corev1.Pod) error {
			if p := tr.c.podNamed(context.Background(), tr.primary.Name); p.Labels[roleLabel] != "replica" {
				return fmt.Errorf("the old primary %s is labelled %q, want replica", p.Name, p.Labels[roleLabel])
			}
			return nil
		},
		expect: checker.Expect{MaxOutage: 20 * time.Second},
	}.run(t)
}
