package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The primary's mysqld crashes (kill -9 of mariadbd): its agent sees the
// server gone and lets the lock go, a replica takes over, and the kubelet
// restarts the server, which rejoins as a replica.
func TestPrimaryMysqldCrash(t *testing.T) {
	scenario{
		name:   "the primary's mysqld crashes",
		leader: otherLeader,
		inject: func(tr *trial) error { return tr.killContainer(tr.primary, "mariadb") },
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 20 * time.Second},
	}.run(t)
}
