package dcs

import (
	"fmt"
	"time"
)

// UnknownHolder is the Leader.Holder of a lock record that exists but cannot
// be read. It is not a valid member name, so no member ever mistakes an
// unreadable lock for its own.
const UnknownHolder = "(unknown)"

// Cluster is one snapshot of the DCS as seen by one member. All times are on
// this member's clock except where a field says otherwise.
type Cluster struct {
	// Name is the cluster name the store was built for.
	Name string
	// Leader is the lock record, nil when nobody holds the lock.
	Leader *Leader
	// Members are the member records, sorted by name. Unreadable records are
	// left out and listed in Problems.
	Members []Member
	// Config is the stored cluster config; DefaultConfig() when none is
	// stored; the last valid one (or the default) when the stored one is
	// unreadable or invalid, which is then listed in Problems.
	Config Config
	// ConfigErr is non-nil (wrapping ErrCorrupt) when a config is stored
	// but cannot be read or is invalid; Config is then not what the cluster
	// was configured with, and a reader must not act on it as if it were.
	ConfigErr error
	// ConfigVersion is the version to pass to SetConfig; "" when no config
	// is stored.
	ConfigVersion string
	// Switchover is the pending switchover request, nil when none.
	Switchover *Switchover
	// Reinit is the pending request to rebuild a member from a donor, nil
	// when none.
	Reinit *Reinit
	// Restart is the pending request to restart a member's mysqld, nil
	// when none.
	Restart *Restart
	// Initialized is the cluster's identity record, nil before bootstrap.
	Initialized *Initialized
	// History lists failovers, switchovers and config changes, oldest
	// first, at most MaxHistory entries.
	History []HistoryEntry
	// ReadAt is when this snapshot was taken; Leader.Expired and
	// Member.Stale are judged at this instant.
	ReadAt time.Time
	// Problems lists every unreadable record (each wraps ErrCorrupt and names
	// the object). The snapshot is still usable: unreadable records are
	// replaced by the safe values documented on each field.
	Problems []error
}

// Member returns the record of the named member.
func (c *Cluster) Member(name string) (Member, bool) {
	for _, m := range c.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Exists reports whether anything of the cluster is stored: a member
// record, the lock, a config, its identity, a request or a history entry,
// or a record too damaged to read. A snapshot of a name nobody created is
// empty, and looks like a cluster with its defaults: agentctl refuses to
// act on one, so that a typo in a cluster's name is not silently obeyed.
func (c *Cluster) Exists() bool {
	return len(c.Members) > 0 || c.Leader != nil || c.ConfigVersion != "" || c.ConfigErr != nil ||
		c.Initialized != nil || c.Switchover != nil || c.Reinit != nil || c.Restart != nil || len(c.History) > 0 || len(c.Problems) > 0
}

// Leader is the leader lock record.
type Leader struct {
	// Holder is the member holding the lock; UnknownHolder when the record
	// cannot be read (Err is then set).
	Holder string
	// Instance identifies the agent process holding the lock (see
	// Member.Instance); "" when the record does not say (written before
	// instance ids existed, or unreadable). A lock is this store's only when
	// both Holder and Instance match.
	Instance string
	// Version is opaque and changes with every write of the record
	// (Kubernetes: resourceVersion; etcd: mod revision).
	Version string
	// TTL is the validity the holder declared at its last write. For an
	// unreadable record it is the cluster config's ttl.
	TTL time.Duration
	// AcquiredAt and RenewedAt are written by the holder on its own clock.
	// They are informational: never compare them with this member's clock.
	// Zero when the backend does not record them (etcd: RenewedAt).
	AcquiredAt, RenewedAt time.Time
	// Transitions counts changes of holder (Kubernetes leaseTransitions);
	// 0 where the backend does not count them (etcd).
	Transitions int64
	// ObservedAt is when this member last saw the record change, on its own
	// clock.
	ObservedAt time.Time
	// Expired reports whether, at Cluster.ReadAt, the lock may be taken by
	// another member under the backend's expiry rule (see the package doc).
	// An etcd leader key bound to a lease never reports Expired: the key
	// vanishes when the lease expires.
	Expired bool
	// Err is non-nil (wrapping ErrCorrupt) when the record could not be read.
	// The lock is then treated as held by UnknownHolder until it expires.
	Err error
}

// Role is the role a member reports for its own mysqld.
type Role uint8

const (
	// RoleUnknown: not determined, unhealthy, errant or fenced.
	RoleUnknown Role = iota
	// RolePrimary: writable source (only while holding the lock).
	RolePrimary
	// RoleReplica: read-only replica.
	RoleReplica
)

var roleNames = [...]string{"unknown", "primary", "replica"}

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool { return int(r) < len(roleNames) }

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", r)
}

// ParseRole parses the String form of a Role.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown role %s (want one of %v)", ErrInvalid, QuoteCut(s), roleNames)
}

// ReplicationState is the state of a member's replication threads.
type ReplicationState uint8

const (
	// ReplicationUnknown: not observed.
	ReplicationUnknown ReplicationState = iota
	// ReplicationNone: no replication configured (a primary, or fresh).
	ReplicationNone
	// ReplicationRunning: IO and SQL threads running.
	ReplicationRunning
	// ReplicationStopped: configured but not running, without an error.
	ReplicationStopped
	// ReplicationBroken: stopped by an error (Member.ReplicationError).
	ReplicationBroken
)

var replicationNames = [...]string{"unknown", "none", "running", "stopped", "broken"}

// Valid reports whether s is one of the defined states.
func (s ReplicationState) Valid() bool { return int(s) < len(replicationNames) }

func (s ReplicationState) String() string {
	if int(s) < len(replicationNames) {
		return replicationNames[s]
	}
	return fmt.Sprintf("ReplicationState(%d)", s)
}

// ParseReplicationState parses the String form of a ReplicationState.
func ParseReplicationState(s string) (ReplicationState, error) {
	for i, n := range replicationNames {
		if n == s {
			return ReplicationState(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown replication state %s (want one of %v)", ErrInvalid, QuoteCut(s), replicationNames)
}

// ReceiverState is the state of a replica's receiver (MySQL's IO thread),
// which tells a replica cut from its source (connecting) from one stopped on
// purpose. Informational: eligibility follows from Member.Lag.
type ReceiverState uint8

const (
	// ReceiverUnknown: not a replica, not observed, or written by an agent
	// older than the field.
	ReceiverUnknown ReceiverState = iota
	// ReceiverRunning: connected to its source, receiving.
	ReceiverRunning
	// ReceiverConnecting: retrying a source it cannot reach.
	ReceiverConnecting
	// ReceiverStopped: not running (stopped, or failed: see Replication).
	ReceiverStopped
)

var receiverNames = [...]string{"", "running", "connecting", "stopped"}

// Valid reports whether s is one of the defined states.
func (s ReceiverState) Valid() bool { return int(s) < len(receiverNames) }

func (s ReceiverState) String() string {
	if int(s) < len(receiverNames) {
		return receiverNames[s]
	}
	return fmt.Sprintf("ReceiverState(%d)", s)
}

// ParseReceiverState parses the String form of a ReceiverState. A name this
// version does not know (a newer agent's) reads as ReceiverUnknown, since
// the field is informational.
func ParseReceiverState(s string) ReceiverState {
	for i, n := range receiverNames {
		if n == s {
			return ReceiverState(i)
		}
	}
	return ReceiverUnknown
}

// Member is the record a member publishes about itself.
type Member struct {
	Name string
	// Instance identifies the agent process that wrote the record; a new one
	// is drawn each time an agent starts. Two live records of one Name with
	// different Instances mean two agents were started with one name.
	Instance string
	Role     Role
	// APIURL is the agent's HTTP API base URL, e.g. "http://10.0.0.5:8008".
	APIURL string
	// MySQLAddr is host:port of mysqld as replicas should reach it.
	MySQLAddr string
	// GTIDExecuted and GTIDRetrieved are GTID sets in the flavor's text form
	// (MySQL "uuid:1-5,..."; MariaDB "domain-server-seq,...").
	GTIDExecuted, GTIDRetrieved string
	Replication                 ReplicationState
	// ReplicationError is the last replication error, if any.
	ReplicationError string
	// Lag is the replication delay; nil when unknown or not a replica. It
	// keeps growing while the receiver does not receive and a leader lives.
	Lag *time.Duration
	// Receiver is the state of the member's replication receiver.
	Receiver ReceiverState
	// NoFailover excludes the member from elections.
	NoFailover bool
	// FailoverPriority ranks equally up-to-date candidates; higher wins; >= 0.
	FailoverPriority int
	// Tags are free-form, informational labels.
	Tags map[string]string
	// AgentVersion is the version of the agent that wrote the record; ""
	// from agents older than the field. Informational.
	AgentVersion string
	// UpdatedAt is set by UpdateMember from the writer's clock.
	// Informational: never compare it with this member's clock.
	UpdatedAt time.Time

	// Set by the store on read; ignored by UpdateMember.

	// Version is opaque and changes with every write of the record.
	Version string
	// ObservedAt is when this member last saw the record change (own clock).
	ObservedAt time.Time
	// Stale reports that the record has not been refreshed for longer than
	// its writer promised (Kubernetes, memory: observed age > member TTL;
	// etcd: never, the key vanishes with its session lease).
	Stale bool
}

// HistoryKind is the kind of a history entry.
type HistoryKind uint8

const (
	// HistoryFailover: an unplanned change of leader.
	HistoryFailover HistoryKind = iota + 1
	// HistorySwitchover: a planned hand-over.
	HistorySwitchover
	// HistoryConfig: a change of the cluster config by an operator; the
	// entry names no member and its Reason lists the changes.
	HistoryConfig
	// HistoryReinit: a member rebuilt from a donor's backup (agentctl
	// reinit); To is the rebuilt member, From the donor, Reason "done" or
	// why it failed.
	HistoryReinit
	// HistorySwitchoverRejected: a switchover the leader refused or gave
	// up on; From is the leader, To the target (when one was chosen),
	// Reason why. agentctl switchover --wait reports it.
	HistorySwitchoverRejected
	// HistoryRestart: a member's mysqld restarted on request (agentctl
	// restart); To is the member, Reason "done" or why it was not.
	HistoryRestart
	// HistoryOther: a kind this version does not know, written by a newer
	// agent or agentctl. It is kept as stored (HistoryEntry.KindName), so
	// that during a rolling upgrade an older agent neither reports the
	// history unreadable nor drops the entry when it appends.
	HistoryOther HistoryKind = 255
)

var historyNames = map[HistoryKind]string{HistoryFailover: "failover", HistorySwitchover: "switchover", HistoryConfig: "config", HistoryReinit: "reinit",
	HistorySwitchoverRejected: "switchover-rejected", HistoryRestart: "restart"}

// Valid reports whether k is one of the defined kinds.
func (k HistoryKind) Valid() bool { _, ok := historyNames[k]; return ok }

func (k HistoryKind) String() string {
	if n, ok := historyNames[k]; ok {
		return n
	}
	return fmt.Sprintf("HistoryKind(%d)", k)
}

// ParseHistoryKind parses the String form of a HistoryKind.
func ParseHistoryKind(s string) (HistoryKind, error) {
	for k, n := range historyNames {
		if n == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown history kind %s (want failover, switchover, config or reinit)", ErrInvalid, QuoteCut(s))
}

// MaxHistory bounds the stored history; AppendHistory drops the oldest.
const MaxHistory = 100

// HistoryEntry records one change of leader, or of the cluster config.
type HistoryEntry struct {
	Kind HistoryKind
	// From and To are the old and new leader; both empty for a config
	// change.
	From, To string
	// At is when the new leader was promoted (its clock), or when the
	// config change was written (the writer's clock).
	At time.Time
	// Reason is a short human-readable cause; for a config change, every
	// changed setting with its old and new value.
	Reason string
	// WriteUnavailable is how long writes were refused; 0 when unknown.
	WriteUnavailable time.Duration
	// KindName is the stored name of a HistoryOther entry's kind.
	KindName string
}

// KindString names the entry's kind, a newer version's too.
func (e HistoryEntry) KindString() string {
	if e.Kind == HistoryOther {
		return e.KindName
	}
	return e.Kind.String()
}

// Switchover is a request for a planned hand-over.
type Switchover struct {
	// From is the leader the request applies to; "" for whoever leads.
	From string
	// To is the requested new leader; "" for the best candidate.
	To string
	// ScheduledAt is the earliest time to act; zero means now.
	ScheduledAt time.Time
	// RequestedAt is set from the writer's clock when zero.
	RequestedAt time.Time
	// Force (manual failover only) lets To take over although it lags or
	// has errant transactions: an operator's explicit decision.
	Force bool

	// Version is set on read; pass it to ClearSwitchover.
	Version string
	// Err is non-nil (wrapping ErrCorrupt) when the stored request cannot be
	// read; the request must then be ignored and cleared.
	Err error
}

// Reinit is a request to rebuild one member's data from a donor's backup.
// One request is pending at a time: a rebuild loads its donor, and two at
// once would compete for the same healthy members.
type Reinit struct {
	// Member is the member to rebuild; never the lock holder.
	Member string
	// Donor is the member whose backup is copied; "" lets the target's
	// agent choose (the best healthy replica, else the leader).
	Donor string
	// RequestedAt is set from the writer's clock when zero.
	RequestedAt time.Time
	// Reason says why an agent asked to rebuild itself (self-healing);
	// "" for a person's agentctl reinit.
	Reason string

	// Version is set on read; pass it to ClearReinit.
	Version string
	// Err is non-nil (wrapping ErrCorrupt) when the stored request cannot be
	// read; the request must then be ignored and cleared.
	Err error
}

// Restart is a request to restart one member's mysqld (agentctl
// restart): its agent shuts mysqld down cleanly and waits for its
// supervisor to start it again. Never the lock holder: agentctl switches
// over first, and a holder's agent refuses. One request is pending at a
// time, so that a rolling restart takes one member down at a time.
type Restart struct {
	Member string
	// RequestedAt is set from the writer's clock when zero. A mysqld that
	// started after it has been restarted already (the agent crashed
	// after the restart, before it cleared the request).
	RequestedAt time.Time

	// Version is set on read; pass it to ClearRestart.
	Version string
	// Err is non-nil (wrapping ErrCorrupt) when the stored request cannot be
	// read; the request must then be ignored and cleared.
	Err error
}

// Initialized records the identity of the cluster's data, written once by the
// member that bootstrapped it.
type Initialized struct {
	// ClusterID identifies the data's lineage: MySQL's server_uuid of the
	// bootstrap source, or a MariaDB gtid_domain_id.
	ClusterID string
	// FirstGTID is the bootstrap source's GTID set when it was recorded.
	FirstGTID string
	// Bootstrapper is the member that bootstrapped the cluster.
	Bootstrapper string
	// At is set from the writer's clock when zero.
	At time.Time

	// Version is set on read.
	Version string
	// Err is non-nil (wrapping ErrCorrupt) when the stored record cannot be
	// read. The cluster then counts as initialized (never bootstrap again)
	// but its identity is unknown: no member can prove it descends from it.
	Err error
}
