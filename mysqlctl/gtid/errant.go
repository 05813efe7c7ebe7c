package gtid

import "fmt"

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
