package dcs

import (
	"context"
	"time"
)

// The Store interface is composed of small interfaces so that consumers can
// declare only what they use; the agent declares its own consumer-side
// interfaces and this one exists for the contract suite and compile-time
// checks in the backends.
//
// A Store belongs to one agent instance of one member of one cluster (all
// three fixed at construction). Every method is safe for concurrent use,
// honours ctx (the agent passes a deadline of retry_timeout), and returns
// errors wrapping the sentinels of this package.

// Snapshotter reads the cluster state.
type Snapshotter interface {
	// Cluster returns a snapshot, from a watch-fed cache where the backend
	// has one. Before the first successful sync it waits for it until ctx
	// is done, then returns ErrUnreachable (or ErrForbidden when the DCS
	// refused the read). Unreadable records do not fail the call; they are
	// listed in Cluster.Problems. A store's snapshot reflects its own
	// successful writes (the write waits, briefly, for its watch to deliver
	// them), so a loop sees what it just did.
	Cluster(ctx context.Context) (*Cluster, error)
	// Changes returns a channel with a buffer of one that receives a value
	// (non-blocking, coalescing) after the snapshot changed, so a loop can
	// select on it instead of polling. The channel is never closed.
	Changes() <-chan struct{}
}

// Locker manages the leader lock.
type Locker interface {
	// AcquireLeader takes the lock for this store's member and instance,
	// declaring ttl as its validity. It succeeds iff nobody holds the lock,
	// or this store's member and instance hold it, or the lock has expired
	// under the backend's rule (see the package doc). A lock naming this
	// member with another instance (or none) is held by someone else.
	// Otherwise it returns ErrHeld naming the holder, or ErrConflict when a
	// concurrent writer won the compare-and-set. ttl must pass ValidateTTL.
	AcquireLeader(ctx context.Context, ttl time.Duration) error
	// RenewLeader extends the lock held by this member and instance,
	// declaring ttl. It returns ErrNotLeader when another member, or another
	// instance of this member, holds the lock, or nobody does. The caller
	// computes its deadline from the start of its last successful call:
	// start + ttl - safety_margin. A failed or timed-out call extends
	// nothing.
	RenewLeader(ctx context.Context, ttl time.Duration) error
	// ReleaseLeader gives the lock up so that others may take it at once.
	// ErrNotLeader when this member and instance do not hold it.
	ReleaseLeader(ctx context.Context) error
	// HandoverLeader makes member `to`, agent instance toInstance (from its
	// member record), the holder in one compare-and-set. Afterwards the
	// RenewLeader of that instance's store succeeds and this one's fails
	// with ErrNotLeader; nobody else, not even another agent started with
	// the name `to`, can take the lock before it expires. ErrNotLeader when
	// this member and instance do not hold the lock; ErrInvalid when
	// ValidateHandover refuses the target. The store does not check that
	// `to` is a live member: the caller does.
	HandoverLeader(ctx context.Context, to, toInstance string) error
	// TakeOverLeader replaces the lock, still valid, that this store's
	// snapshot showed at version (Leader.Version), with one for this
	// store's member and instance, declaring ttl, in one compare-and-set:
	// a lossless failover takes the lock of a holder confirmed dead without
	// waiting for its ttl. ErrConflict when the lock is not at version any
	// more (renewed where a renewal changes it, released, taken). The
	// store does not judge the holder dead: the caller does.
	TakeOverLeader(ctx context.Context, version string, ttl time.Duration) error
}

// MemberWriter publishes this member's record.
type MemberWriter interface {
	// UpdateMember writes this member's record (m.Name must be the store's
	// member or empty, m.Instance the store's instance or empty; empty ones
	// are filled in). To bound the write rate it skips the write when only
	// volatile fields (GTIDs, Lag, UpdatedAt) changed and the last write is
	// younger than the store's member refresh interval; any other change is
	// written at once. It overwrites a record another instance of this
	// member wrote: whether to write is the caller's decision.
	UpdateMember(ctx context.Context, m Member) error
}

// StateWriter changes the cluster-wide records.
type StateWriter interface {
	// SetConfig stores cfg if the stored config's version is still version
	// ("" when none is stored), else ErrConflict. cfg must Validate.
	SetConfig(ctx context.Context, cfg Config, version string) error
	// ChangeConfig stores cfg as SetConfig does and appends e to the
	// history in the same atomic write: an operator's change is never
	// applied unrecorded, nor recorded unapplied. ErrConflict when the
	// stored config's version is not version any more (a concurrent
	// history append is retried internally); ErrInvalid when cfg does not
	// Validate or e is not a valid entry.
	ChangeConfig(ctx context.Context, cfg Config, version string, e HistoryEntry) error
	// RequestSwitchover stores a switchover request if none is pending, else
	// ErrExists.
	RequestSwitchover(ctx context.Context, sw Switchover) error
	// ClearSwitchover deletes the pending request if its version is still
	// version: ErrNotFound when none is pending, ErrConflict when it changed.
	ClearSwitchover(ctx context.Context, version string) error
	// RequestReinit stores a request to rebuild a member if none is
	// pending, else ErrExists.
	RequestReinit(ctx context.Context, r Reinit) error
	// ClearReinit deletes the pending reinit request if its version is
	// still version: ErrNotFound when none is pending, ErrConflict when it
	// changed.
	ClearReinit(ctx context.Context, version string) error
	// RequestRestart stores a request to restart a member's mysqld if none
	// is pending, else ErrExists.
	RequestRestart(ctx context.Context, r Restart) error
	// ClearRestart deletes the pending restart request if its version is
	// still version: ErrNotFound when none is pending, ErrConflict when it
	// changed.
	ClearRestart(ctx context.Context, version string) error
	// SetInitialized records the cluster's identity once: ErrExists when it
	// is already recorded.
	SetInitialized(ctx context.Context, init Initialized) error
	// AppendHistory appends e, keeping the newest MaxHistory entries. It
	// retries lost compare-and-sets internally until ctx is done.
	AppendHistory(ctx context.Context, e HistoryEntry) error
}

// MemberRemover deletes what a member that is gone left behind.
type MemberRemover interface {
	// DeleteMember deletes the record of member name unless the member is
	// live: it holds the leader lock (unexpired under the backend's rule)
	// or its record is live under the backend's rule (see the package
	// doc), and then it returns ErrLive saying which. The delete is a
	// compare-and-set on the record's version that was judged: ErrConflict
	// when the record changed in between, ErrNotFound when there is no
	// record. Afterwards this store's snapshot no longer lists the member;
	// an agent that still runs writes its record again.
	DeleteMember(ctx context.Context, name string) error
}

// Store is the whole contract of one member's view of one cluster.
type Store interface {
	Snapshotter
	Locker
	MemberWriter
	StateWriter
	MemberRemover
	// Member returns the member name the store was built for.
	Member() string
	// Instance returns the agent instance id the store was built for: the
	// one it writes into the lock and the member record.
	Instance() string
	// Close stops watches and background work. It does not release the
	// lock: a stopping leader calls ReleaseLeader first.
	Close() error
}
