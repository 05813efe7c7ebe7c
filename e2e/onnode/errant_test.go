package onnode

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// A replica has a transaction of its own (written as root past read_only,
// as a careless operator might). Its agent reports it errant, agentctl
// status shows it, and when the primary's agent then dies the errant
// replica is not a candidate: the lock goes to the clean replica, or back
// to the old primary, whose agent the kubelet restarts within the ttl and
// which races like everybody once its predecessor's lock expires (it has
// every write; CI saw it win). The errant member is rebuilt afterwards
// (tr.recreate), and must then hold every acknowledged write.
func TestErrantReplicaExcluded(t *testing.T) {
	// The member stays errant through the scenario: the test deployment
	// runs with rebuild_diverged=report (main_test.go).
	scenario{
		name:   "an errant replica excluded from candidacy",
		leader: anyLeader,
		inject: func(tr *trial) error {
			errant := tr.replicas[0]
			if err := writeErrant(tr, errant); err != nil {
				return err
			}
			if err := waitStatusState(tr.c, errant.Name, "errant", 20*time.Second); err != nil {
				return err
			}
			tr.at = time.Now() // the fault proper: the phases count from here
			return tr.killContainer(tr.primary, "agent")
		},
		verify: func(tr *trial, now corev1.Pod) error {
			if tr.changedTo == tr.replicas[0].Name || now.Name == tr.replicas[0].Name {
				return fmt.Errorf("the errant replica %s took the lock", tr.replicas[0].Name)
			}
			if now.Name != tr.primary.Name {
				return wantPrimary(now, tr.replicas[1].Name)
			}
			return nil
		},
		repair: func(tr *trial) error { return tr.recreate(tr.replicas[0].Name) },
		expect: checker.Expect{MaxOutage: 20 * time.Second},
	}.run(t)
}

// writeErrant commits a row on replica, logged in its binary log, over its
// socket as root (read_only does not stop root).
func writeErrant(tr *trial, replica corev1.Pod) error {
	pid, err := tr.pid(replica, "mariadb")
	if err != nil {
		return err
	}
	db := openSocket(pid, 5*time.Second)
	defer db.Close()
	_, err = db.ExecContext(context.Background(), "INSERT INTO app.w (id) VALUES (?)", -time.Now().UnixNano()/1000)
	return err
}

// waitStatusState waits until agentctl status shows member in state.
func waitStatusState(c *cluster, member, state string, timeout time.Duration) error {
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		states, err := memberStates(c)
		if err != nil {
			last = err.Error()
			continue
		}
		if last = states[member]; last == state {
			return nil
		}
	}
	return fmt.Errorf("agentctl status never showed %s as %q within %s (last %q)", member, state, timeout, last)
}

// memberStates is each member's state as agentctl status -o json shows it.
func memberStates(c *cluster) (map[string]string, error) {
	cmd, err := agentctl(c, "status", "-o", "json")
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("agentctl status: %w", err)
	}
	var st struct {
		Members []struct{ Name, State string }
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("agentctl status -o json: %v: %s", err, out)
	}
	states := map[string]string{}
	for _, m := range st.Members {
		states[m.Name] = m.State
	}
	return states, nil
}
