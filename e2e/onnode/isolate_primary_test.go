package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// The primary is cut off from everything (API server, peers, clients, the
// kubelet's network) for 20 s, then healed. It cannot renew the lock, so
// it makes itself read-only before the lock's deadline; a replica takes
// over after ttl. Healed, the old primary rejoins as a replica. No instant
// has two writable members, even though the isolated one cannot be
// reached: the monitor reads it through its socket.
func TestPrimaryIsolated(t *testing.T) {
	primaryIsolated("the primary isolated from everything, then healed").run(t)
}

func primaryIsolated(name string) scenario {
	return scenario{
		name:   name,
		leader: otherLeader,
		hold:   20 * time.Second,
		inject: func(tr *trial) error { return tr.isolate(tr.primary) },
		expect: checker.Expect{MayLose: asyncLossAllowance, MaxOutage: 30 * time.Second},
		target: 8 * time.Second,
	}
}
