package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The primary's agent crashes (kill -9) while its mysqld keeps running,
// writable. When the lock expires a replica takes it, fences the old
// server over the network (read_only, connections killed), catches up from
// it, and only then promotes: nothing is lost and never two are writable.
func TestPrimaryAgentCrash(t *testing.T) {
	scenario{
		name:   "the primary's agent crashes",
		leader: anyLeader,
		inject: func(tr *trial) error { return tr.killContainer(tr.primary, "agent") },
		expect: checker.Expect{MaxOutage: 20 * time.Second},
		target: 8 * time.Second,
	}.run(t)
}
