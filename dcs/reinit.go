package dcs

import (
	"fmt"
	"sort"
)

// ErrNoDonor means no member can give its data to a rebuild.
var ErrNoDonor = fmt.Errorf("%w: no healthy donor", ErrNotFound)

// ReinitDonor picks the member whose backup rebuilds target: the named
// donor if given (it must be healthy), else the healthy replica with the
// least lag (a backup loads its donor, so a replica is spared the
// primary's clients), else the leader. Healthy: a fresh record, and either
// the lock holder or a replica whose replication runs. agentctl and the
// target's agent judge by this one rule.
func (c *Cluster) ReinitDonor(target, donor string) (Member, error) {
	healthy := func(m Member) error {
		switch {
		case m.Name == target:
			return fmt.Errorf("%w: %s cannot be its own donor", ErrInvalid, m.Name)
		case m.Stale:
			return fmt.Errorf("%w: donor %s's record is stale (is its agent running?)", ErrNoDonor, m.Name)
		case m.APIURL == "":
			return fmt.Errorf("%w: donor %s publishes no API URL", ErrNoDonor, m.Name)
		case c.holds(m.Name):
			return nil
		case m.Role != RoleReplica || m.Replication != ReplicationRunning:
			return fmt.Errorf("%w: donor %s is not a streaming replica (role %s, replication %s)", ErrNoDonor, m.Name, m.Role, m.Replication)
		}
		return nil
	}
	if donor != "" {
		m, ok := c.Member(donor)
		if !ok {
			return Member{}, fmt.Errorf("%w: donor %s has no member record", ErrNoDonor, donor)
		}
		return m, healthy(m)
	}
	var replicas []Member
	for _, m := range c.Members {
		if !c.holds(m.Name) && healthy(m) == nil {
			replicas = append(replicas, m)
		}
	}
	sort.SliceStable(replicas, func(i, j int) bool { return lagOf(replicas[i]) < lagOf(replicas[j]) })
	if len(replicas) > 0 {
		return replicas[0], nil
	}
	if c.Leader != nil && c.Leader.Holder != target {
		if m, ok := c.Member(c.Leader.Holder); ok && healthy(m) == nil {
			return m, nil
		}
	}
	return Member{}, fmt.Errorf("%w for %s: no streaming replica and no live leader", ErrNoDonor, target)
}

// ReinitPending reports whether a readable reinit request names member:
// its data is about to be replaced, so it must not be chosen to lead.
func (c *Cluster) ReinitPending(member string) bool {
	return c.Reinit != nil && c.Reinit.Err == nil && c.Reinit.Member == member
}

func (c *Cluster) holds(name string) bool {
	return c.Leader != nil && !c.Leader.Expired && c.Leader.Holder == name
}

// lagOf orders unknown lag last.
func lagOf(m Member) int64 {
	if m.Lag == nil {
		return 1 << 62
	}
	return int64(*m.Lag)
}
