package gtid

import (
	"cmp"
	"fmt"
	"slices"
)

// History is a server's transaction history: every transaction it has
// executed or retrieved (received into its relay log, applied or not), in
// either flavor, so code that compares servers, such as failover ranking,
// works the same for both. Retrieved transactions count because a promoted
// replica applies its relay log before it takes writes.
//
// Like the other values of this package it is immutable. The zero History
// is the empty history of no flavor; [History.Union] with it yields the
// other operand.
type History struct {
	flavor Flavor
	set    Set        // MySQL
	pos    MariaDBPos // MariaDB
}

// ParseHistory parses a server's executed and retrieved GTIDs in flavor's
// syntax and returns their union. For MySQL both are GTID sets
// (@@gtid_executed, Retrieved_Gtid_Set); for MariaDB both are positions
// (@@gtid_binlog_pos, Gtid_IO_Pos) and the union is their per-domain
// maximum ([MariaDBPos.Merge]). Either may be "". A parse error matches
// [ErrMalformed] and says which of the two was malformed.
func ParseHistory(flavor Flavor, executed, retrieved string) (History, error) {
	h := History{flavor: flavor}
	switch flavor {
	case MySQL:
		e, err := ParseSet(executed)
		if err != nil {
			return History{}, fmt.Errorf("executed GTID set: %w", err)
		}
		r, err := ParseSet(retrieved)
		if err != nil {
			return History{}, fmt.Errorf("retrieved GTID set: %w", err)
		}
		h.set = e.Union(r)
	case MariaDB:
		e, err := ParseMariaDBPos(executed)
		if err != nil {
			return History{}, fmt.Errorf("executed GTID position: %w", err)
		}
		r, err := ParseMariaDBPos(retrieved)
		if err != nil {
			return History{}, fmt.Errorf("retrieved GTID position: %w", err)
		}
		h.pos = e.Merge(r)
	default:
		return History{}, fmt.Errorf("gtid: unknown flavor %v", flavor)
	}
	return h, nil
}

// Union returns the history holding every transaction of h or o: for MySQL
// the union of the sets, for MariaDB the per-domain maximum of the positions.
// h and o should be of the same flavor; the result has h's flavor, or o's if
// h is the zero History.
func (h History) Union(o History) History {
	return History{flavor: cmp.Or(h.flavor, o.flavor), set: h.set.Union(o.set), pos: h.pos.Merge(o.pos)}
}

// Missing counts the transactions of o that h lacks: for MySQL the size of
// o's set minus h's, for MariaDB how far h's position is behind o's
// ([MariaDBPos.Behind]). 0 means h has everything o has, as far as the
// flavor can tell: a MariaDB position measures lag, not divergence (see
// [ErrantMariaDB]). The flavor is h's, or o's if h is the zero History.
func (h History) Missing(o History) uint64 {
	if cmp.Or(h.flavor, o.flavor) == MariaDB {
		return h.pos.Behind(o.pos)
	}
	return o.set.Subtract(h.set).Count()
}

// String returns the canonical form of the history in its flavor's syntax
// (a GTID set or a MariaDB position); "" when it is empty.
func (h History) String() string {
	if h.flavor == MariaDB {
		return h.pos.String()
	}
	return h.set.String()
}

// Without returns h less a member's errant transactions (as [Errant] or
// [ErrantMariaDBState] report them), so that what remains is the history it
// shares with the cluster. For MySQL that is the set difference. A MariaDB
// position keeps only the last GTID of each domain, so the legitimate part
// of a domain with errant transactions cannot be told from the rest: the
// whole domain is left out.
func (h History) Without(errant string) (History, error) {
	if h.flavor == MariaDB {
		gs, err := parseMariaDBState(errant)
		if err != nil {
			return History{}, fmt.Errorf("errant GTIDs: %w", err)
		}
		kept := slices.DeleteFunc(h.pos.GTIDs(), func(g MariaDBGTID) bool {
			return slices.ContainsFunc(gs, func(e MariaDBGTID) bool { return e.Domain == g.Domain })
		})
		return History{flavor: h.flavor, pos: MariaDBPos{gtids: kept}}, nil
	}
	e, err := ParseSet(errant)
	if err != nil {
		return History{}, fmt.Errorf("errant GTIDs: %w", err)
	}
	return History{flavor: h.flavor, set: h.set.Subtract(e)}, nil
}
