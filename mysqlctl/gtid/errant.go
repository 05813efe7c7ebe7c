package gtid

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ErrantMySQL returns the transactions the replica has executed that the
// primary has not. A non-empty result means the replica has diverged and must
// not be promoted or re-pointed before the errant transactions are handled.
func ErrantMySQL(replica, primary Set) Set {
	return replica.Subtract(primary)
}

// ErrantMariaDB returns the replica's entries for every domain in which the
// replica holds a transaction the primary does not: a domain the primary
// lacks, a higher seq_no than the primary's, or the same seq_no written by a
// different server_id (two different transactions got that seq_no, i.e. the
// histories forked). Entries with seq_no 0 carry no transactions and are
// never errant.
//
// A lower seq_no is never reported: the position alone cannot tell an old
// replica from a diverged one, and under gtid_strict_mode the former is the
// only possibility.
func ErrantMariaDB(replica, primary MariaDBPos) MariaDBPos {
	var errant []MariaDBGTID
	for _, r := range replica.gtids {
		if !primary.has(r) {
			errant = append(errant, r)
		}
	}
	return MariaDBPos{gtids: errant}
}

// Errant parses replica and primary in the given flavor's syntax and returns
// the canonical form of [ErrantMySQL] or [ErrantMariaDB]; "" means the replica
// has no errant transactions.
func Errant(flavor Flavor, replica, primary string) (string, error) {
	switch flavor {
	case MySQL:
		r, err := ParseSet(replica)
		if err != nil {
			return "", fmt.Errorf("replica GTID set: %w", err)
		}
		p, err := ParseSet(primary)
		if err != nil {
			return "", fmt.Errorf("primary GTID set: %w", err)
		}
		return ErrantMySQL(r, p).String(), nil
	case MariaDB:
		r, err := ParseMariaDBPos(replica)
		if err != nil {
			return "", fmt.Errorf("replica GTID position: %w", err)
		}
		p, err := ParseMariaDBPos(primary)
		if err != nil {
			return "", fmt.Errorf("primary GTID position: %w", err)
		}
		return ErrantMariaDB(r, p).String(), nil
	}
	return "", fmt.Errorf("gtid: unknown flavor %v", flavor)
}

// ErrantMariaDBState compares two MariaDB @@gtid_binlog_state values (the
// last GTID each server logged in each domain, so one domain may appear once
// per server) and returns, in canonical order, the replica's entries the
// primary's history does not contain: a (domain, server_id) the primary
// never logged, or a higher seq_no from that server. This sees what a
// position cannot: a replica that wrote 0-2-29 on its own while the primary
// went on to 0-1-100 is behind by position, but forked by state. "" means
// no errant transactions.
func ErrantMariaDBState(replica, primary string) (string, error) {
	r, err := parseMariaDBState(replica)
	if err != nil {
		return "", fmt.Errorf("replica gtid_binlog_state: %w", err)
	}
	p, err := parseMariaDBState(primary)
	if err != nil {
		return "", fmt.Errorf("primary gtid_binlog_state: %w", err)
	}
	var errant []string
	for _, g := range r {
		if g.Seq == 0 {
			continue
		}
		if !slices.ContainsFunc(p, func(o MariaDBGTID) bool {
			return o.Domain == g.Domain && o.ServerID == g.ServerID && o.Seq >= g.Seq
		}) {
			errant = append(errant, g.String())
		}
	}
	return strings.Join(errant, ","), nil
}

// parseMariaDBState parses a gtid_binlog_state: GTIDs separated by ',',
// several per domain (one per server), each checked as ParseMariaDBPos does.
func parseMariaDBState(in string) ([]MariaDBGTID, error) {
	var out []MariaDBGTID
	if strings.TrimSpace(in) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(in, ",") {
		pos, err := ParseMariaDBPos(part)
		if err != nil {
			return nil, err
		}
		if pos.IsEmpty() {
			return nil, &ParseError{Input: in, Reason: "empty GTID in the list", Flavor: MariaDB}
		}
		out = append(out, pos.GTIDs()...)
	}
	slices.SortFunc(out, func(a, b MariaDBGTID) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.ServerID, b.ServerID))
	})
	return out, nil
}
