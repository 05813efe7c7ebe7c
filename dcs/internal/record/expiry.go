package record

import "time"

// Expired is the one expiry rule of the DCS backends: a record that declares
// a validity of ttl, and that this store last saw change at observedAt, has
// lapsed at now once now >= observedAt + ttl. observedAt and now are both
// read from this store's own injected clock. The times the writer put into
// the record (a Lease's renewTime and acquireTime, a member's updated_at)
// never enter: clocks of different machines are never compared, so any
// offset between them is harmless and only the rate at which two clocks
// drift apart within one ttl matters.
//
// It is the rule of client-go's leaderelection: LeaderElector.isLeaseValid
// holds the lock while observedTime.Add(leaseDurationSeconds).After(now),
// where observedTime is the elector's own clock.Now() when it last saw the
// raw record change (setObservedRecord), and leaseDurationSeconds is the
// duration the record declares. Expired is its negation, so a record is
// expired at exactly observedAt + ttl, as there.
//
// What observedAt and ttl are is the backend's:
//   - kubernetes: the leader Lease's Leader.Expired (which AcquireLeader
//     acts on) and a member Lease's Member.Stale. observedAt is when this
//     store's cache took in a newer resourceVersion of the Lease (from the
//     informer, or from its own write); ttl is leaseDurationSeconds, or the
//     cluster config's ttl for a leader Lease that cannot be read. Unlike
//     client-go, a change is a new resourceVersion, not new bytes of the
//     record: every renew writes one.
//   - memory: Leader.Expired, AcquireLeader's check and Member.Stale.
//     observedAt is when this store's view first showed the record's
//     revision; ttl is the lock's declared ttl or the writer's member ttl.
//   - etcd: only a leader key not bound to a lease (written by hand).
//     A leased leader key is judged by the etcd server alone and vanishes
//     when its lease expires; member keys vanish with their session lease.
func Expired(observedAt time.Time, ttl time.Duration, now time.Time) bool {
	return !now.Before(observedAt.Add(ttl))
}
