package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The primary's mysqld hangs (SIGSTOP of mariadbd, as on a stalled disk):
// it neither answers nor refuses, so no SQL can fence it. Its agent, which
// shares the pod's process namespace, kills it once it has hung for ttl and
// lets the lock go; a replica takes over, the kubelet restarts the server,
// and it rejoins. The hung server can never resume writable next to the new
// primary. Bound: ttl + 10 s.
func TestPrimaryMysqldHang(t *testing.T) {
	scenario{
		name:   "the primary's mysqld hangs",
		leader: otherLeader,
		inject: func(tr *trial) error {
			pid, err := tr.pid(tr.primary, "mariadb")
			if err != nil {
				return err
			}
			_, err = tr.faults.Freeze(pid)
			return err
		},
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 15 * time.Second},
	}.run(t)
}
