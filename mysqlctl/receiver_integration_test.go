package mysqlctl_test

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl"
)

// What the agent's lag rule (agent/lag.go) relies on, on a real server: a
// replica whose source died reports its receiver connecting, with no
// Seconds_Behind_Source and no error, so the agent neither trusts a stale
// delay nor takes the outage for broken replication.
func TestReceiverOfADeadSourceIsConnecting(t *testing.T) {
	top := buildTopology(t)
	ctx := ctxT(t, 30*time.Second)
	mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (1, 'before')")
	r := top.replicas[0]
	if err := r.WaitForGTID(ctx, executed(t, top.primary), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	top.servers[0].Kill()
	var rs *mysqlctl.ReplicaStatus
	waitFor(t, 15*time.Second, "the receiver to notice its source died", func() bool {
		obs, err := r.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rs = obs.Replica
		return rs != nil && rs.IOThread != mysqlctl.ThreadRunning
	})
	if rs == nil || rs.IOThread != mysqlctl.ThreadConnecting || rs.SecondsBehind != nil || rs.Broken() {
		t.Fatalf("replica of a killed source: %+v; want receiver connecting, no delay, not broken", rs)
	}
}
