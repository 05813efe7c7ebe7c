// Package salvage saves the transactions a diverged MariaDB member holds
// that the leader lacks, before the agent rebuilds the member.
//
// After an asynchronous failover the old primary may come back with
// transactions that never reached the new leader. Rebuilding it from a donor
// replaces its data directory and, with it, the only copy of those
// transactions. Save first copies exactly those transactions out of the
// member's binary logs ([Extract]), renders them with mariadb-binlog as SQL a
// person can read, and writes the result atomically to a file in a directory
// that survives the rebuild. Replayed on the primary with the mariadb client,
// the file applies them as new transactions under the primary's own GTIDs.
//
// Guarantees:
//   - A saved file holds every selected transaction in the binary logs it
//     was given, in binary-log order, and nothing else; it exists completely
//     or not at all.
//   - Extract verifies every event it reads: the magic bytes, event sizes
//     against the file's end and, where the log has them, CRC32 checksums. A
//     truncated, corrupt or encrypted log is an error naming the file and
//     offset, never a silently shorter file.
//
// It does not decide which transactions are extra beyond comparing GTIDs
// ([NotIn]), and it does not replay anything: whether the saved transactions
// still make sense on the new primary is for a person to judge.
package salvage
