package agent

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// readRefusal says why we serve no reads now ("" when we do, and on a
// member that is not a replica), and announces a change with a log line and
// an Event: our pod's readiness, and so the read Service, follows it. A
// member that stops being a replica leaves silently: its role change says
// it all.
func (a *Agent) readRefusal(obs mysqlctl.Observation, localErr error, lag *time.Duration) string {
	if a.role != dcs.RoleReplica {
		a.readsOff = ""
		return ""
	}
	refusal := failover.ReadRefusal(failover.ReadState{
		Role: a.role, Healthy: localErr == nil, Replication: replicationState(obs, localErr),
		Lag: lag, Limit: a.clusterConfig.MaximumLagForReads,
	})
	if (refusal == "") != (a.readsOff == "") {
		// Event only queues (podrole), so it needs no deadline of ours.
		if refusal != "" {
			a.log.Warn("serving no reads: not Ready, so out of the read Service", zap.String("why", refusal))
			a.labeler.Event(context.Background(), a.self.Name, eventWarning, "ReadsOff", "out of the read Service: "+refusal)
		} else {
			a.log.Info("serving reads again: Ready, back in the read Service", zap.String("was", a.readsOff))
			a.labeler.Event(context.Background(), a.self.Name, eventNormal, "ReadsOn", "back in the read Service")
		}
	}
	a.readsOff = refusal
	return refusal
}
