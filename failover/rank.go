package failover

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Rules are the cluster settings that make a member ineligible.
type Rules struct {
	// MaxLag is maximum_lag_on_failover; 0 means no limit.
	MaxLag time.Duration
	// Lossless is semi_sync strict: a replica that streams without
	// acknowledging may lack acknowledged writes, and never takes over.
	Lossless bool
	// Fenced is the cluster's fenced setting (dcs.Config.Fenced): members
	// an operator fenced, which never lead until unfenced. No force
	// overrides it.
	Fenced string
}

// IsFenced reports whether an operator fenced member (agentctl fence).
func (r Rules) IsFenced(member string) bool { return dcs.Config{Fenced: r.Fenced}.IsFenced(member) }

// Ineligibility says why a member may not take over; "" means it may.
func Ineligibility(m Member, rules Rules) string {
	switch {
	case rules.IsFenced(m.Name):
		return "it is fenced (agentctl fence; agentctl unfence lifts it)"
	case m.Rebuilding:
		// Before the rest, since a rebuild also takes its mysqld down: say why.
		return "it is being rebuilt (agentctl reinit)"
	case m.Restarting:
		return "its mysqld is being restarted (agentctl restart)"
	case !m.Fresh:
		return "its status is stale"
	case !m.Healthy:
		return "its mysqld is down"
	case m.NoFailover:
		return "it is tagged nofailover"
	case m.ReplicationBroken:
		return "its replication is broken"
	case m.Errant:
		return "it has errant transactions"
	case m.Misconfigured != "":
		return "its mysqld could not serve replicas: " + m.Misconfigured
	case m.Hold != "":
		return m.Hold
	case rules.Lossless && m.Async:
		return "it replicates without acknowledging (semi_sync strict)"
	case rules.MaxLag > 0 && m.Lag != nil && *m.Lag > rules.MaxLag:
		return fmt.Sprintf("its lag %s exceeds maximum_lag_on_failover %s", *m.Lag, rules.MaxLag)
	}
	return ""
}

// Candidate is an eligible member with its rank inputs.
type Candidate struct {
	Member
	// Missing counts the transactions that some other candidate has and this
	// one lacks; 0 for a member whose history is a superset of all others.
	Missing uint64
	// Unapplied counts the transactions it has received but not applied
	// yet: its promotion, or a hand-over to it, waits for them.
	Unapplied uint64
}

// RankCandidates returns the eligible members, best first: the most complete
// history (retrieved ∪ executed) wins, then the higher failover priority,
// then the fewer transactions left to apply (a member re-cloned by
// replication receives the whole history long before it has applied it,
// and a hand-over to it would wait out its deadline), then the lower name.
// A member whose GTIDs do not parse is left out, since nothing can be
// proven about its data.
func RankCandidates(flavor gtid.Flavor, members []Member, rules Rules) []Candidate {
	var (
		cands []Candidate
		hists []gtid.History
		all   gtid.History // the union of every candidate's history
	)
	for _, m := range members {
		if Ineligibility(m, rules) != "" {
			continue
		}
		h, err := gtid.ParseHistory(flavor, m.Executed, m.Retrieved)
		if err != nil {
			continue
		}
		cands = append(cands, Candidate{Member: m})
		hists = append(hists, h)
		all = all.Union(h)
	}
	for i := range cands {
		cands[i].Missing = hists[i].Missing(all)
		if applied, err := gtid.ParseHistory(flavor, cands[i].Executed, ""); err == nil {
			cands[i].Unapplied = applied.Missing(hists[i])
		}
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Missing, b.Missing), cmp.Compare(b.Priority, a.Priority),
			cmp.Compare(a.Unapplied, b.Unapplied), cmp.Compare(a.Name, b.Name))
	})
	return cands
}

// RulesOf reads the eligibility rules from the cluster config.
func RulesOf(c dcs.Config) Rules {
	return Rules{MaxLag: c.MaximumLagOnFailover, Lossless: c.SemiSync == dcs.SemiSyncStrict, Fenced: c.Fenced}
}
