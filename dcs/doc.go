// Package dcs is the backend-neutral contract between the HA agent and its
// distributed configuration store (DCS): the leader lock, member records,
// cluster configuration, the pending switchover request, the "initialized"
// record and the failover/switchover history.
//
// The agents agree on who leads only through this contract, so it states
// precisely what a backend guarantees:
//
//   - At most one member holds the leader lock at any instant as far as the
//     DCS is concerned. Every write that depends on holding it is a
//     compare-and-set on the lock record's version (Kubernetes: the Lease's
//     resourceVersion; etcd: the leader key's create revision and value).
//   - A member other than the holder may take the lock only after the lock
//     record has not changed for its declared ttl. For the Kubernetes and
//     in-memory backends the observer measures that on its own injected clock
//     from the moment it saw the last change (the client-go rule); clocks of
//     different machines are never compared. For etcd the server-side lease
//     is the one authority: the leader key vanishes when its lease expires.
//   - Lock renewal is a write the holder makes at least every loop_wait; a
//     holder that stops renewing loses the lock after ttl. Nothing renews the
//     lock in the background: a frozen agent loses it, as it must.
//   - A record that cannot be decoded is reported (ErrCorrupt, naming the
//     object and what is wrong) and never read as "held by me" or as "free".
//   - A lock holder is a member name and an agent instance id, drawn anew
//     by every agent process (Store.Instance). The lock and the member
//     record carry both, and a store treats the lock as its own only when
//     both match: a second agent started with the same name (a force-deleted
//     pod still running on a cut-off node, say) finds the lock held by
//     someone else, and a lock without an instance id (written by an older
//     agent) is never any store's own.
//
// A member is live, and DeleteMember refuses to delete its record, while it
// holds the leader lock, or while its record is live by the backend's rule:
//
//   - Kubernetes and memory: the record changed within its member ttl
//     (the member Lease's leaseDurationSeconds; the writer's member ttl)
//     as this store observed it on its own clock, i.e. Member.Stale is
//     false. A running agent rewrites its record at least every member
//     refresh. A store that has just started saw every record change at
//     its start, so it calls a member gone only after watching its record
//     stay unchanged for a member ttl; clocks are never compared.
//   - etcd: the record is bound to a session lease that etcd still holds,
//     judged by the etcd server alone, as the lock is. A stopped agent's
//     record vanishes with its lease: at once when the agent stops
//     cleanly, within the member ttl after a crash. So DeleteMember only
//     deletes a record bound to no lease (written by hand, or by a tool),
//     or to one that expired and that etcd has not reaped yet.
//
// What this package does not do: it does not fence. The holder must compute
// its own deadline from the start of its last successful RenewLeader
// (deadline = start + ttl - safety_margin) and make mysqld read-only before
// it (the fence deadline). A DCS cannot stop a paused process from
// writing to MySQL after its lock expired.
//
// Snapshots (Store.Cluster) are served from a watch-fed cache where the
// backend allows it, so a loop iteration costs no reads; they may lag the
// DCS by the watch latency, or by longer while the DCS is unreachable. That
// is safe because every write is a compare-and-set and the holder's authority
// is the result of its own renew, never the snapshot.
package dcs
