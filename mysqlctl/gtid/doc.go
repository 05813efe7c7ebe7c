// Package gtid owns global-transaction-identifier arithmetic for both
// server flavors the agent manages:
//
//   - [Set] is a MySQL (Oracle) GTID set such as @@gtid_executed or the
//     Retrieved/Executed_Gtid_Set columns of SHOW REPLICA STATUS, including
//     MySQL 8.4 tagged GTIDs (uuid:tag:N-M).
//   - [MariaDBPos] is a MariaDB GTID position such as @@gtid_current_pos,
//     @@gtid_slave_pos or Gtid_IO_Pos: one domain-server-seq triple per
//     replication domain.
//   - [History] is a server's executed ∪ retrieved transactions in either
//     flavor, for comparing servers without caring which flavor they run.
//
// Failover ranking, "has the candidate executed everything" checks and
// errant-transaction detection ([ErrantMySQL], [ErrantMariaDB], [Errant])
// are all built on this package, so it guarantees:
//
//   - Parsing is strict: anything the servers would not print (zero or
//     reversed intervals, leading zeros, out-of-range numbers, malformed
//     UUIDs, empty list elements, duplicate MariaDB domains) is rejected
//     with a [*ParseError] that matches [ErrMalformed] via errors.Is.
//     Whitespace is tolerated around commas, because SHOW REPLICA STATUS
//     prints ",\n" between UUID sets.
//   - No input makes any function panic.
//   - Values are immutable: every operation returns a new value and never
//     modifies its receiver or arguments, so values may be shared between
//     goroutines freely. The zero value of each type is the empty set or
//     position.
//   - String returns one canonical spelling per value (lowercase UUIDs and
//     tags, sorted, intervals merged), and parsing that spelling yields an
//     equal value.
//
// The package is a leaf: it imports only the standard library and knows
// nothing about connections or servers.
package gtid
