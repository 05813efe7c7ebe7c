package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The API server is down for 30 s (stopped, then restarted on the same
// address and storage, and the controller manager with it, as a restart of
// the control-plane node does). No agent can renew or take the lock: the
// primary demotes itself before its deadline (failsafe mode, the
// deployment's default, is off here; TestFailsafeAPIServerDown runs with
// it), so writes stop for about the outage; nothing is
// lost, no two members are ever writable, and once the API server is back
// a primary is elected and routed again. Routing takes longest: the lock
// is won within a second of the API server's return, but the primary
// Service's endpoints follow only when the endpoint controller and
// kube-proxy have re-established their watches; hence the 120 s bound.
// Without the controller manager's restart its stale watches also delayed
// the routing of the next scenario's trial.
func TestAPIServerDown(t *testing.T) {
	withoutFailsafe(t, func() {
		apiServerDown("the API server down for 30 s, without failsafe").run(t)
	})
}

func apiServerDown(name string) scenario {
	return scenario{
		name:   name,
		leader: anyLeader,
		hold:   30 * time.Second,
		inject: func(tr *trial) error {
			api := tr.c.node.APIServer()
			restart := func() error {
				if err := api.Restart(); err != nil {
					return err
				}
				return tr.c.node.RestartControllers()
			}
			_, err := tr.faults.Inject("API server down", func() error { api.Stop(); return nil }, restart)
			return err
		},
		expect: checker.Expect{MaxOutage: 120 * time.Second},
	}
}
