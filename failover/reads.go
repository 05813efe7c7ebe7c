package failover

import (
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Reads: whether a replica serves reads. Its pod is Ready only when it
// does, so the read Service (<cluster>-replicas) leaves a stale replica out
// and takes it back once it has caught up.

// ReadState is what decides whether a replica serves reads.
type ReadState struct {
	Role dcs.Role
	// Healthy: the replica's mysqld answered the last observation.
	Healthy     bool
	Replication dcs.ReplicationState
	// Lag is the replica's delay (agent/lag.go): the server's own while
	// its receiver runs, growing with the time since it last received
	// while a leader lives, frozen while none does; nil when unknown.
	Lag *time.Duration
	// Limit is maximum_lag_for_reads; 0 is no limit.
	Limit time.Duration
}

// ReadRefusal says why a replica serves no reads; "" when it does.
//
// The limit bounds how stale a read may be, and the lag is that bound
// whatever the cause: a replica whose receiver is down while its source
// writes leaves once it has received nothing for the limit, not at the
// first blip (a repoint, a receiver the agent restarts). During a failover
// nobody writes and the lag freezes, so replicas keep serving reads while
// writes wait for the new primary. With no limit (0) every replica serves
// however stale, for those who prefer stale reads to none; a replica whose
// mysqld does not answer or whose replication is broken never serves.
func ReadRefusal(s ReadState) string {
	switch {
	case s.Role != dcs.RoleReplica:
		return "not a replica"
	case !s.Healthy:
		return "mysqld does not answer"
	case s.Replication == dcs.ReplicationBroken:
		return "replication broken"
	case s.Limit == 0:
		return ""
	case s.Lag == nil:
		return "lag unknown"
	case *s.Lag > s.Limit:
		return fmt.Sprintf("lag %s over maximum_lag_for_reads %s", s.Lag.Round(100*time.Millisecond), s.Limit)
	}
	return ""
}
