package agent

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// duplicateIdentity says whether another live agent runs with our member
// name: a member record with our name written by another instance, not
// stale. The exceptions are our own predecessor (this agent restarted):
// its record advertises an API URL at which we now answer, so it is gone;
// and a predecessor that said it stopped (failover.TagStopped: its last
// record, written on SIGTERM), as every pod of a rolling update does. A
// predecessor that died elsewhere (a pod rescheduled to a new address)
// is waited out until its record goes stale.
func (a *Agent) duplicateIdentity(ctx context.Context, cl *dcs.Cluster) string {
	m, ok := cl.Member(a.self.Name)
	if !ok || m.Instance == "" || m.Instance == a.instance || m.Stale {
		return ""
	}
	if m.Tags[failover.TagStopped] != "" {
		return ""
	}
	if m.APIURL != "" {
		pctx, cancel := context.WithTimeout(ctx, a.clusterConfig.RetryTimeout/2)
		st, err := a.peerStatus(pctx, m.APIURL)
		cancel()
		if err == nil && st.Instance == a.instance {
			return ""
		}
	}
	return fmt.Sprintf("agent instance %s publishes member %s (API %s, MySQL %s) and its record is live; this is instance %s",
		m.Instance, m.Name, m.APIURL, m.MySQLAddr, a.instance)
}

// reportDuplicate logs a change of the duplicate-identity finding, sets its
// metric and, when one appears, records a DuplicateIdentity Event.
func (a *Agent) reportDuplicate(ctx context.Context, dup string) {
	if dup == a.duplicate {
		return
	}
	a.duplicate = dup
	if dup == "" {
		a.metrics.DuplicateIdentity.Set(0)
		a.log.Info("no other live agent with our member name any more")
		return
	}
	a.metrics.DuplicateIdentity.Set(1)
	a.log.Error("another live agent runs with our member name: refusing to act, mysqld stays fenced", zap.String("duplicate", dup))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "DuplicateIdentity", "refusing to act: "+dup)
}
