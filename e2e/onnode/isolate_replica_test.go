package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// A replica is cut off from everything for 20 s: the primary keeps its
// lock and serves writes without a pause; healed, the replica catches up.
func TestReplicaIsolated(t *testing.T) {
	scenario{
		name:   "a replica isolated, then healed",
		leader: sameLeader,
		hold:   20 * time.Second,
		inject: func(tr *trial) error { return tr.isolate(tr.replicas[0]) },
		expect: checker.Expect{MaxOutage: 3 * time.Second},
	}.run(t)
}
