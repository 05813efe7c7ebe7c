package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The API server is down for 30 s (stopped, then restarted on the same
// address and storage). No agent can renew or take the lock: the primary
// demotes itself before its deadline (there is no failsafe mode yet, see
// the README), so writes stop for about the outage; nothing is lost, no two
// members are ever writable, and once the API server is back a primary is
// elected and routed again. Routing takes longest: measured here, the lock
// is won within a second of the API server's return but the primary
// Service's endpoints follow 25 to 50 s later, as the node's components
// re-establish their watches; hence the 120 s bound.
func TestAPIServerDown(t *testing.T) {
	scenario{
		name:   "the API server down for 30 s",
		leader: anyLeader,
		hold:   30 * time.Second,
		inject: func(tr *trial) error {
			api := tr.c.node.APIServer()
			_, err := tr.faults.Inject("API server down", func() error { api.Stop(); return nil }, api.Restart)
			return err
		},
		expect: checker.Expect{MaxOutage: 120 * time.Second},
	}.run(t)
}
