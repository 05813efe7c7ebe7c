package failover

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Ineligibility says why a member may not take over; "" means it may.
func Ineligibility(m Member, maxLag time.Duration) string {
	switch {
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
	case m.Hold != "":
		return m.Hold
	case maxLag > 0 && m.Lag != nil && *m.Lag > maxLag:
		return fmt.Sprintf("its lag %s exceeds maximum_lag_on_failover %s", *m.Lag, maxLag)
	}
	return ""
}

// Candidate is an eligible member with its rank inputs.
type Candidate struct {
	Member
	// Missing counts the transactions that some other candidate has and this
	// one lacks; 0 for a member whose history is a superset of all others.
	Missing uint64
}

// RankCandidates returns the eligible members, best first: the most complete
// history (retrieved ∪ executed) wins, then the higher failover priority,
// then the lower name. A member whose GTIDs do not parse is left out, since
// nothing can be proven about its data.
func RankCandidates(flavor gtid.Flavor, members []Member, maxLag time.Duration) []Candidate {
	var (
		cands []Candidate
		hists []gtid.History
		all   gtid.History // the union of every candidate's history
	)
	for _, m := range members {
		if Ineligibility(m, maxLag) != "" {
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
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Missing, b.Missing), cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Name, b.Name))
	})
	return cands
}
