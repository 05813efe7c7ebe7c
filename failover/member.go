package failover

import (
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Member is what the deciding agent knows of one cluster member, itself
// included.
type Member struct {
	Name string
	// Addr is where its mysqld is reached, as replicas pull from it.
	Addr string
	// Fresh: the member's record is current and, where asked, it answered
	// over HTTP. A member that is not fresh is presumed dead.
	Fresh bool
	// Healthy: its mysqld answers.
	Healthy bool
	// StartingUp: its agent answers but has not read its mysqld since it
	// started (a pod coming back): what its record says it holds is on its
	// disk, unread yet. False for a running agent whose mysqld died.
	StartingUp bool
	NoFailover bool
	Priority   int
	// ReplicationBroken: a replication thread stopped with an error.
	ReplicationBroken bool
	// Errant: it has transactions the leader it followed did not have;
	// ErrantGTIDs lists them when known.
	Errant      bool
	ErrantGTIDs string
	// Executed and Retrieved are GTID sets in the flavor's text form.
	Executed, Retrieved string
	// BinlogState (MariaDB) is @@gtid_binlog_state, known for ourselves
	// and for the peers probed this iteration: it tells a forked history
	// from one that is behind, which a position cannot.
	BinlogState string
	// Lag is the replication delay last observed while its source was up;
	// nil when unknown.
	Lag *time.Duration
	// Hold, when set, says why the member holds back from racing for now.
	Hold string
	// Async: it streams from the primary without acknowledging (a
	// semi-sync cluster's replica whose semi-sync receiver is off), so it
	// may lack acknowledged writes. Primary: its record says it was the
	// primary.
	Async, Primary bool
	// Rebuilding: its data is being replaced from a donor's backup
	// (agentctl reinit): a pending request names it, or its record carries
	// TagRebuilding. Whatever it holds now is about to go.
	Rebuilding bool
	// Restarting: its mysqld is being restarted (agentctl restart): a
	// pending request names it, or its record carries TagRestarting. Its
	// data stays; its mysqld is about to go down, so it must not lead.
	Restarting bool
	// RecordStale: its DCS record has not been refreshed for longer than
	// its writer promised (Fresh also turns false when its agent did not
	// answer us just now).
	RecordStale bool
	// Removed: its record is stale and its pod does not exist (a
	// StatefulSet scaled down, a member deleted): no mysqld runs for it,
	// and none will come back with its name's record as it stands.
	Removed bool
	// Acknowledgers is, on a lossless primary's record, TagAcknowledgers
	// read; AcknowledgersKnown is false when the record has no such tag.
	Acknowledgers      []string
	AcknowledgersKnown bool
	// Misconfigured names the server settings it lacks to serve as a
	// source (mysqlctl.Status.SourceMisconfigured); "" when it has them.
	Misconfigured string

	// Set for peers whose mysqld the deciding agent probed this iteration
	// (it does while leading or promoting):
	//
	// Observed: it was probed. Reachable: it answered, and Writable and
	// PullingFrom (the source address its receiver is pulling from, "" when
	// the receiver is stopped) are what it answered. Down: the connection
	// was refused, so no mysqld runs there.
	Observed, Reachable, Down, Writable bool
	PullingFrom                         string
}

// Tags of a member record (dcs.Member.Tags) that say something about its
// eligibility. The agent writes them; FromRecord reads TagErrant, and
// agentctl shows it as the member's state.
const (
	// TagErrant holds the member's errant GTIDs: transactions it has that
	// the leader it followed lacks.
	TagErrant = "errant"
	// TagLagging is set while the member's lag exceeds
	// maximum_lag_on_failover, so that a crossing of the limit is published
	// at once even though the lag itself is written less often.
	TagLagging = "lagging"
	// TagAsync is set while the member, in a semi-sync cluster, streams
	// from the primary without acknowledging its writes.
	TagAsync = "async"
	// TagMisconfigured holds the server settings the member lacks to serve
	// as a source (no binary log, say): it is never promoted.
	TagMisconfigured = "misconfigured"
	// TagStalled is set on a semi-sync primary whose commits wait for an
	// acknowledgement that no replica can give (semi_sync strict never
	// falls back): it says why writes hang.
	TagStalled = "stalled"
	// TagRebuilding names the donor while the member is rebuilt from its
	// backup (agentctl reinit); it says so after the request is cleared,
	// while a rebuild past its point of no return finishes.
	TagRebuilding = "rebuilding"
	// TagRestarting is set while the agent restarts its mysqld on request
	// (agentctl restart).
	TagRestarting = "restarting"
	// TagStopped is on the last record an agent writes as it stops
	// (SIGTERM): no agent acts for the member until a new one starts, and
	// that one need not wait the record out as a duplicate's.
	TagStopped = "stopped"
	// TagNoReads says why a replica serves no reads (ReadRefusal): its pod
	// is not Ready, so the read Service leaves it out.
	TagNoReads = "noreads"
	// TagPod holds the UID of the member's pod (Kubernetes): peers read its
	// containers' state from the API server (failover.Snapshot.LeaderPodDown).
	TagPod = "pod"
	// TagPaused is set while the agent runs under a paused cluster config:
	// it has seen the pause and acts on it (agentctl pause --wait).
	TagPaused = "paused"
)

// FromRecord is what a member's DCS record alone says of it: fresh unless
// the store judged the record stale, healthy unless its role is unknown,
// errant when TagErrant is set, asynchronous when TagAsync is,
// rebuilding when TagRebuilding is, restarting when TagRestarting is, misconfigured as TagMisconfigured says. The agent overlays what it learns live
// (HTTP status, probes); agentctl has only the record.
func FromRecord(m dcs.Member) Member {
	acks, known := parseAcknowledgers(m.Tags)
	return Member{
		RecordStale: m.Stale, Acknowledgers: acks, AcknowledgersKnown: known,
		Name: m.Name, Addr: m.MySQLAddr, Fresh: !m.Stale, Healthy: m.Role != dcs.RoleUnknown, NoFailover: m.NoFailover,
		Priority: m.FailoverPriority, ReplicationBroken: m.Replication == dcs.ReplicationBroken,
		Errant: m.Tags[TagErrant] != "", ErrantGTIDs: m.Tags[TagErrant], Executed: m.GTIDExecuted, Retrieved: m.GTIDRetrieved, Lag: m.Lag,
		Async: m.Tags[TagAsync] != "", Primary: m.Role == dcs.RolePrimary, Misconfigured: m.Tags[TagMisconfigured],
		Rebuilding: m.Tags[TagRebuilding] != "", Restarting: m.Tags[TagRestarting] != "",
	}
}
