// Package failover holds the pure HA decisions of one agent: Decide turns a
// snapshot of what the agent observed (its mysqld, the DCS, its peers) into
// the one Action to take now; RankCandidates orders the members that may
// take over from a lost leader.
//
// It performs no I/O and reads no clock: the snapshot carries the time. It
// imports only the standard library, mysqlctl/gtid and the record types of
// dcs (FromRecord reads a member record), so every branch is covered by
// table tests without servers.
//
// The split-brain rules it encodes: a member that believes it may write
// fences at once when its deadline passed or the lock is no longer its own
// (vanished, expired, another member, or our name with another agent
// instance); an agent whose name another live agent uses refuses to act; a
// member writable without the lock fences; a holder with mysqld down gives
// the lock up, one whose mysqld hangs keeps it; nobody races for a lock that
// is held and unexpired; only an eligible member races, the best-ranked at
// once, the others after a grace period; a promotion fences every writable
// member and stops every foreign receiver before it unfences, and gives the
// lock up to a reachable eligible member with transactions it lacks; the
// leader fences any writable member every iteration; a paused cluster (or
// one whose config cannot be read) changes nothing but the holder's renewal.
package failover
