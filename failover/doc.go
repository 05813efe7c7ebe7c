// Package failover holds the pure HA decisions of one agent: Decide turns a
// snapshot of what the agent observed (its mysqld, the DCS, its peers) into
// the one Action to take now; RankCandidates orders the members that may
// take over from a lost leader.
//
// It performs no I/O and reads no clock: the snapshot carries the time. It
// imports only the standard library and mysqlctl/gtid, so every branch is
// covered by table tests without servers.
//
// The split-brain rules it encodes (DESIGN.md section 3): a holder past its
// own deadline fences before anything else; a member with mysqld down gives
// the lock up; nobody races for a lock that is held and unexpired; only an
// eligible member races, the best-ranked at once, the others after a grace
// period; a paused cluster changes nothing but the holder's renewal.
package failover
