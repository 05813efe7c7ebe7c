package failover

import (
	"fmt"
	"sort"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Rebuilds (agentctl reinit): who may be rebuilt now, and from whom.
// agentctl judges a request by these rules, and the target's agent again
// when it starts the rebuild.

// ErrNoDonor means no member can give its data to a rebuild.
var ErrNoDonor = fmt.Errorf("%w: no healthy donor", dcs.ErrNotFound)

// ReinitTarget is what the target's agent knows of itself.
type ReinitTarget struct {
	// CanRebuild: the agent runs with --mysql-datadir.
	CanRebuild bool
	// HoldsLock: it has a deadline of its own, or the lock names it.
	HoldsLock bool
	Flavor    gtid.Flavor
}

// ReinitRefusal says why the target must not be rebuilt now; "" when it
// may.
func ReinitRefusal(t ReinitTarget) string {
	switch {
	case !t.CanRebuild:
		return "the agent runs without --mysql-datadir, so it cannot rebuild its member"
	case t.HoldsLock:
		return "the member holds the leader lock; switch over first"
	case t.Flavor != gtid.MariaDB:
		return "rebuilding a MySQL member (CLONE INSTANCE) is not implemented in the agent yet"
	}
	return ""
}

// ReinitDonor picks the member whose backup rebuilds target: the named
// donor if given (it must be fit), else the fit replica with the least
// lag (a backup loads its donor, so a replica spares the primary's
// clients), else the leader. Fit: a fresh record with an API URL, neither
// errant, being rebuilt, nor lagging beyond maximum_lag_on_failover (its
// copy would be all the target has), and either the lock holder or a
// replica whose replication runs.
func ReinitDonor(cl *dcs.Cluster, target, donor string) (dcs.Member, error) {
	rules := RulesOf(cl.Config)
	holds := func(name string) bool { return cl.Leader != nil && !cl.Leader.Expired && cl.Leader.Holder == name }
	fit := func(m dcs.Member) error {
		fm := FromRecord(m)
		switch {
		case m.Name == target:
			return fmt.Errorf("%w: %s cannot be its own donor", dcs.ErrInvalid, m.Name)
		case m.Stale:
			return fmt.Errorf("%w: donor %s's record is stale (is its agent running?)", ErrNoDonor, m.Name)
		case m.APIURL == "":
			return fmt.Errorf("%w: donor %s publishes no API URL", ErrNoDonor, m.Name)
		case fm.Errant:
			return fmt.Errorf("%w: donor %s has errant transactions (%s)", ErrNoDonor, m.Name, fm.ErrantGTIDs)
		case fm.Rebuilding || cl.ReinitPending(m.Name):
			return fmt.Errorf("%w: donor %s is being rebuilt itself", ErrNoDonor, m.Name)
		case fm.Restarting || cl.RestartPending(m.Name):
			return fmt.Errorf("%w: donor %s is restarting its mysqld (agentctl restart)", ErrNoDonor, m.Name)
		case holds(m.Name):
			return nil
		case m.Role != dcs.RoleReplica || m.Replication != dcs.ReplicationRunning:
			return fmt.Errorf("%w: donor %s is not a streaming replica (role %s, replication %s)", ErrNoDonor, m.Name, m.Role, m.Replication)
		case m.Tags[TagLagging] != "" || rules.MaxLag > 0 && m.Lag != nil && *m.Lag > rules.MaxLag:
			return fmt.Errorf("%w: donor %s lags beyond maximum_lag_on_failover (%s)", ErrNoDonor, m.Name, rules.MaxLag)
		}
		return nil
	}
	if donor != "" {
		m, ok := cl.Member(donor)
		if !ok {
			return dcs.Member{}, fmt.Errorf("%w: donor %s has no member record", ErrNoDonor, donor)
		}
		return m, fit(m)
	}
	var replicas []dcs.Member
	for _, m := range cl.Members {
		if !holds(m.Name) && fit(m) == nil {
			replicas = append(replicas, m)
		}
	}
	sort.SliceStable(replicas, func(i, j int) bool { return lagOf(replicas[i]) < lagOf(replicas[j]) })
	if len(replicas) > 0 {
		return replicas[0], nil
	}
	if cl.Leader != nil && cl.Leader.Holder != target {
		if m, ok := cl.Member(cl.Leader.Holder); ok && fit(m) == nil {
			return m, nil
		}
	}
	return dcs.Member{}, fmt.Errorf("%w for %s: no fit streaming replica and no live leader", ErrNoDonor, target)
}

// lagOf orders unknown lag last.
func lagOf(m dcs.Member) int64 {
	if m.Lag == nil {
		return 1 << 62
	}
	return int64(*m.Lag)
}
