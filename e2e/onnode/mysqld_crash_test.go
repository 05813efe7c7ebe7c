package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The primary's mysqld crashes (kill -9 of mariadbd). Either its agent
// sees the server gone and lets the lock go, a replica takes over, and the
// restarted server rejoins as a replica; or the kubelet restarts the
// server (crash recovery keeps every committed write: sync_binlog=1,
// innodb_flush_log_at_trx_commit=1) before the agent's next look, and the
// agent, still holding the lock, makes it writable again. Both happened
// here; both keep the invariants.
func TestPrimaryMysqldCrash(t *testing.T) {
	scenario{
		name:   "the primary's mysqld crashes",
		leader: anyLeader,
		inject: func(tr *trial) error { return tr.killContainer(tr.primary, "mariadb") },
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 20 * time.Second},
	}.run(t)
}
