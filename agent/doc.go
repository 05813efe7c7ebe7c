// Package agent is the HA sidecar of one database member. One goroutine owns
// the member's state and runs, every loop_wait or when the DCS changes:
//
//	observe (local mysqld via mysqlctl, the DCS snapshot, peers over HTTP)
//	-> decide (failover.Decide, pure)
//	-> act (mysqlctl on the local and peer servers, the DCS, pod labels)
//
// Every action is idempotent, so a crash between any two steps is repaired by
// the next iteration of whichever agent runs next.
//
// The agent guarantees, on top of the DCS contract:
//   - mysqld is made read-only when the agent starts, and is made writable
//     only while the agent holds the lock with a deadline of its own:
//     start of its last successful renewal + ttl - safety_margin;
//   - it fences mysqld (read-only, clients killed) before that deadline if
//     the lock was not renewed, from a watchdog goroutine that does not wait
//     for a stuck loop, and the loop itself fences first when it wakes past
//     the deadline (a frozen process);
//   - the fence holds without this process: FenceAtStart fences mysqld
//     before any start-up step that can fail, and a dead-man switch, an
//     event inside mysqld armed before unfencing and pushed back on every
//     renewal, fences it at the same instant as the watchdog if no push
//     comes (deadman.go); a member on which it cannot be armed is never
//     made writable;
//   - a new leader, before becoming writable, stops the receivers of every
//     reachable replica (so a semi-sync old source can acknowledge nothing
//     more) and fences every member that answers writable; if either fails
//     it stays read-only and retries. It then drops old primary labels and
//     applies its whole relay log;
//   - the leader fences any other member it finds writable, every iteration;
//   - identity is the member name and this process's instance id: a lock
//     naming another instance is not ours, and an agent that finds a live
//     record of its name from another instance refuses to act.
//
// Which of these applies when is failover.Decide's to say; act only carries
// the decision out, stopping at the first step that fails.
//
// It also serves the HTTP API (/healthz, /readyz, /primary, /replica,
// /status, /cluster, /metrics). Only cmd/agent imports this package.
package agent
