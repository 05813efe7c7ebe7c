package record

import (
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// LockHolderLive is DeleteMember's refusal for the holder of an unexpired
// leader lock, in every backend.
func LockHolderLive(member string) error {
	return fmt.Errorf("%w: %s holds the leader lock; hand it over first (a switchover), then stop its agent", dcs.ErrLive, member)
}

// RecordLive is DeleteMember's rule where a member is judged by its record
// (kubernetes, memory): nil once the record has stayed unchanged for its
// member ttl since this store observed it change at observedAt (Expired,
// on this store's clock), else ErrLive saying how long it still has to.
func RecordLive(member string, observedAt time.Time, ttl time.Duration, now time.Time) error {
	if Expired(observedAt, ttl, now) {
		return nil
	}
	return fmt.Errorf("%w: %s's record changed %v ago as this store saw it (or this store started), within its member ttl %v; "+
		"a running agent rewrites it at least every member refresh, and a stopped one's counts as gone once it stays unchanged for the ttl",
		dcs.ErrLive, member, now.Sub(observedAt).Round(time.Second), ttl)
}
