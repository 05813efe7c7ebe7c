// Package etcd is the etcd v3 backend of the dcs contract.
//
// # Layout
//
// All keys of a cluster live under <prefix>/<cluster>/ (prefix "/mysqlha" by
// default):
//
//	leader          {"holder","instance","ttl_seconds","acquired_at"} bound to a lock lease
//	members/<name>  member record (JSON) bound to the member's session lease
//	config          cluster config (JSON)
//	switchover      pending switchover request (JSON)
//	reinit          pending request to rebuild a member (JSON)
//	restart         pending request to restart a member's mysqld (JSON)
//	initialized     cluster identity (JSON)
//	history         failover/switchover history (JSON list)
//
// # Guarantees
//
// The leader key is created with a transaction "create revision == 0" and is
// bound to a lease with TTL = ttl that is granted for this purpose alone and
// kept alive only by RenewLeader (KeepAliveOnce), never in the background: a
// frozen agent loses the lock after ttl, as with Patroni. Expiry is judged
// by the etcd server alone — one authority, no comparison of clocks — and
// the key vanishes when its lease expires. Every write that depends on
// holding the lock is a transaction guarded by the key's create revision (the
// fencing token of one tenure) and its exact value, which names the holder's
// member and agent instance: a tenure belongs to one agent process, not to
// a name. A hand-over rewrites the value to the new holder and instance,
// bound to a fresh lease, in one guarded transaction; the store of that
// member and instance adopts the lease from the key.
//
// A leader key that is not bound to any lease (written by hand) could never
// expire, so it is judged like a Kubernetes Lease: taken over after it has
// not changed for ttl on this member's clock. A key bound to a lease is never
// taken over before its lease expires, even when its content is garbage,
// because a live holder does not rewrite its key when renewing.
//
// Member keys are bound to a per-store session lease (member ttl, kept alive
// in the background): a dead member's record vanishes, so DeleteMember only
// ever deletes a member key bound to no live lease. The other records use
// mod-revision compare-and-set.
//
// One watch on the prefix feeds a cache from which Cluster is served, and
// signals Changes; it relists after compaction or errors.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "/mysqlha"

const (
	// listTimeout bounds the initial and re-list reads of the watch loop.
	listTimeout = 5 * time.Second
	// revokeTimeout bounds best-effort lease revocations.
	revokeTimeout = time.Second
	// maxBackoff caps the delay between failed watch attempts.
	maxBackoff = 2 * time.Second
	// casAttempts bounds AppendHistory's retries of a lost compare-and-set.
	casAttempts = 10
	// catchUpTimeout bounds how long a write waits for the watch to deliver
	// it (read-your-writes); the write has succeeded either way.
	catchUpTimeout = time.Second
)

// Options configure a Store.
type Options struct {
	// Client is the etcd client; the caller owns it and closes it after
	// the Store.
	Client *clientv3.Client
	// Prefix of all keys; DefaultPrefix when empty.
	Prefix string
	// Cluster and Member name this store (both required).
	Cluster, Member string
	// Instance is the agent instance id this store writes into the leader
	// key and the member record (dcs.ValidateInstance); a random one when
	// empty.
	Instance string
	// Clock judges unleased leader keys and the member write rate;
	// clock.RealClock{} when nil.
	Clock clock.Clock
	// Logger; zap.NewNop() when nil.
	Logger *zap.Logger
	// MemberTTL is the session lease TTL of the member record;
	// dcs.DefaultMemberTTL when 0.
	MemberTTL time.Duration
	// MemberRefresh is the longest UpdateMember goes without writing;
	// dcs.DefaultMemberRefresh when 0.
	MemberRefresh time.Duration
}

// Store is one member's view of one cluster in etcd.
type Store struct {
	cli                      *clientv3.Client
	prefix                   string // "<prefix>/<cluster>/"
	cluster, name, instance  string
	clock                    clock.Clock
	log                      *zap.Logger
	memberTTL, memberRefresh time.Duration
	changes                  chan struct{}
	syncedCh                 chan struct{}
	ctx                      context.Context
	cancel                   context.CancelFunc
	done                     chan struct{}
	closeOnce                sync.Once

	// lockMu serializes lock operations; memberMu member writes.
	lockMu   sync.Mutex
	held     *hold
	memberMu sync.Mutex

	mu         sync.Mutex // guards the fields below
	synced     bool
	lastErr    error
	rev        int64         // revision the cache reflects
	revCh      chan struct{} // closed and replaced when rev advances
	kvs        map[string]*mvccpb.KeyValue
	observed   map[string]time.Time
	lastConfig dcs.Config
	session    clientv3.LeaseID // 0 when none or lost
	lastMember *dcs.Member
	lastAt     time.Time
	lastRev    int64
}

var _ dcs.Store = (*Store)(nil)

// New validates opts and starts the store's watch. It does not wait for the
// first sync: Cluster does.
func New(opts Options) (*Store, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("%w: etcd client is nil", dcs.ErrInvalid)
	}
	if err := dcs.ValidateName("cluster", opts.Cluster); err != nil {
		return nil, err
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(opts.Prefix, "/") || strings.HasSuffix(opts.Prefix, "/") {
		return nil, fmt.Errorf("%w: prefix %q must start and not end with '/'", dcs.ErrInvalid, opts.Prefix)
	}
	o, err := record.StoreOptions{
		Member: opts.Member, Instance: opts.Instance, Clock: opts.Clock, Logger: opts.Logger,
		MemberTTL: opts.MemberTTL, MemberRefresh: opts.MemberRefresh,
	}.WithDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		cli: opts.Client, prefix: opts.Prefix + "/" + opts.Cluster + "/",
		cluster: opts.Cluster, name: o.Member, instance: o.Instance, clock: o.Clock,
		// The caller's logger names the cluster and member once.
		log:       o.Logger.Named("dcs-etcd").With(zap.String("instance", o.Instance)),
		memberTTL: o.MemberTTL, memberRefresh: o.MemberRefresh,
		changes: make(chan struct{}, 1), syncedCh: make(chan struct{}),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		kvs: map[string]*mvccpb.KeyValue{}, observed: map[string]time.Time{},
		lastConfig: dcs.DefaultConfig(), revCh: make(chan struct{}),
	}
	go s.run()
	return s, nil
}

func (s *Store) key(k string) string { return s.prefix + k }

// Member implements dcs.Store.
func (s *Store) Member() string { return s.name }

// Instance implements dcs.Store.
func (s *Store) Instance() string { return s.instance }

// Changes implements dcs.Store.
func (s *Store) Changes() <-chan struct{} { return s.changes }

// Close stops the watch and revokes the member session, so this member's
// record vanishes at once. It does not release the leader lock.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		s.mu.Lock()
		id := s.session
		s.session = 0
		s.mu.Unlock()
		if id != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
			defer cancel()
			if _, err := s.cli.Revoke(ctx, id); err != nil {
				s.log.Debug("revoking member session on close", zap.Error(err))
			}
		}
	})
	return nil
}

// mapErr is the one place where etcd's native errors become dcs sentinels.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: etcd did not answer in time: %w", op, dcs.ErrUnreachable, err)
	}
	ev := rpctypes.Error(err)
	switch ev {
	case rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrInvalidAuthToken,
		rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrAuthOldRevision:
		return fmt.Errorf("%s: %w: etcd refused it (%v); grant the agent's etcd user read and write on its key prefix", op, dcs.ErrForbidden, ev)
	case rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrStopped, rpctypes.ErrTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex,
		rpctypes.ErrUnhealthy, rpctypes.ErrTooManyRequests, rpctypes.ErrLeaderChanged, rpctypes.ErrNoSpace:
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrUnreachable, ev)
	case rpctypes.ErrLeaseNotFound:
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrNotFound, ev)
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrUnreachable, err)
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Errorf("%s: %w: %v; check the agent's etcd credentials and role", op, dcs.ErrForbidden, err)
	case codes.Canceled:
		return fmt.Errorf("%s: %w: %v", op, context.Canceled, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ver is a record's version: its key's mod revision.
func ver(kv *mvccpb.KeyValue) string { return strconv.FormatInt(kv.ModRevision, 10) }

// ttlSeconds is ttl as an etcd lease TTL, in whole seconds.
func ttlSeconds(ttl time.Duration) int64 { return int64(ttl / time.Second) }

// revoke revokes lease id, best effort: a lease left behind expires by
// itself.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if _, err := s.cli.Revoke(ctx, id); err != nil {
		s.log.Debug("revoking lease", zap.Int64("lease", int64(id)), zap.Error(err))
	}
}
