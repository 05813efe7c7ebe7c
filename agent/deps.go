package agent

import (
	"context"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// Store is the part of the DCS contract the agent uses.
type Store interface {
	Cluster(ctx context.Context) (*dcs.Cluster, error)
	Changes() <-chan struct{}
	AcquireLeader(ctx context.Context, ttl time.Duration) error
	RenewLeader(ctx context.Context, ttl time.Duration) error
	ReleaseLeader(ctx context.Context) error
	HandoverLeader(ctx context.Context, to, toInstance string) error
	TakeOverLeader(ctx context.Context, version string, ttl time.Duration) error
	UpdateMember(ctx context.Context, m dcs.Member) error
	SetConfig(ctx context.Context, cfg dcs.Config, version string) error
	ClearSwitchover(ctx context.Context, version string) error
	ClearReinit(ctx context.Context, version string) error
	// RequestReinit asks for a rebuild: the agent asks for its own (heal.go).
	RequestReinit(ctx context.Context, r dcs.Reinit) error
	ClearRestart(ctx context.Context, version string) error
	SetInitialized(ctx context.Context, init dcs.Initialized) error
	AppendHistory(ctx context.Context, e dcs.HistoryEntry) error
	// Instance is this agent's instance id, carried in the lock and the
	// member record.
	Instance() string
}

// Peer is what the agent does to another member's mysqld during a
// promotion or a hand-over.
type Peer interface {
	Observe(ctx context.Context) (mysqlctl.Observation, error)
	Fence(ctx context.Context) error
	KillClients(ctx context.Context) (int, error)
	StopReplicationIO(ctx context.Context) error
	WaitForGTID(ctx context.Context, set string, timeout time.Duration) error
}

// Database is the local mysqld.
type Database interface {
	Peer
	Server() mysqlctl.ServerInfo
	Unfence(ctx context.Context) error
	ReplicateFrom(ctx context.Context, src mysqlctl.Source) error
	ResetReplication(ctx context.Context) error
	StartReplication(ctx context.Context) error
	SetSemiSyncSource(ctx context.Context, enabled bool, timeout time.Duration, waitForReplicas int) error
	SetSemiSyncReplica(ctx context.Context, enabled bool) error
	// ArmDeadman makes mysqld fence itself after the delay, on its own
	// clock, unless called again before (the dead-man switch).
	ArmDeadman(ctx context.Context, after time.Duration) error
}

// Dialer opens a connection to a mysqld at addr ("host:port"); the agent
// uses the same credentials for its own server and its peers.
type Dialer func(ctx context.Context, addr string) (Database, error)

// PeerStatus fetches a peer agent's live status from its API base URL.
type PeerStatus func(ctx context.Context, apiURL string) (*MemberStatus, error)

// Labeler writes pod role labels and Kubernetes Events. Without Kubernetes
// the agent uses a no-op.
type Labeler interface {
	// SetRole labels pod with role; dcs.RoleUnknown removes the role label.
	SetRole(ctx context.Context, pod string, role dcs.Role) error
	// RemovePrimary drops pod's role label only if it still says primary.
	RemovePrimary(ctx context.Context, pod string) error
	// Event records an event on pod; best effort, never fails the caller.
	Event(ctx context.Context, pod, eventType, reason, message string)
	// PodGone reports that pod does not exist (the API server said so): a
	// member scaled away or deleted runs no mysqld. False when unknown.
	PodGone(ctx context.Context, pod string) (bool, error)
	// PodDown reports why, when the kubelet reports every container of
	// pod, that UID, not running; "" otherwise (or when unknown).
	PodDown(ctx context.Context, pod, uid string) (string, error)
}

type noLabels struct{}

func (noLabels) SetRole(context.Context, string, dcs.Role) error         { return nil }
func (noLabels) RemovePrimary(context.Context, string) error             { return nil }
func (noLabels) Event(context.Context, string, string, string, string)   {}
func (noLabels) PodGone(context.Context, string) (bool, error)           { return false, nil }
func (noLabels) PodDown(context.Context, string, string) (string, error) { return "", nil }

var (
	_ Peer     = (*mysqlctl.Instance)(nil)
	_ Database = (*mysqlctl.Instance)(nil)
	_ Store    = (dcs.Store)(nil)
)
