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
// in the background): a dead member's record vanishes. The other records use
// mod-revision compare-and-set.
//
// One watch on the prefix feeds a cache from which Cluster is served, and
// signals Changes; it relists after compaction or errors.
package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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

// hold is the state of a tenure this store holds (or adopted).
type hold struct {
	lease     clientv3.LeaseID
	createRev int64
	value     []byte
	ttl       time.Duration
}

type leaderJSON struct {
	Holder string `json:"holder"`
	// Instance is absent in keys written by agents older than instance ids.
	Instance   string    `json:"instance,omitempty"`
	TTLSeconds int64     `json:"ttl_seconds"`
	AcquiredAt time.Time `json:"acquired_at"`
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
	if err := dcs.ValidateName("member", opts.Member); err != nil {
		return nil, err
	}
	var err error
	if opts.Instance, err = record.StoreInstance(opts.Instance); err != nil {
		return nil, err
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(opts.Prefix, "/") || strings.HasSuffix(opts.Prefix, "/") {
		return nil, fmt.Errorf("%w: prefix %q must start and not end with '/'", dcs.ErrInvalid, opts.Prefix)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MemberTTL, opts.MemberRefresh, err = record.MemberTiming(opts.MemberTTL, opts.MemberRefresh); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		cli: opts.Client, prefix: opts.Prefix + "/" + opts.Cluster + "/",
		cluster: opts.Cluster, name: opts.Member, instance: opts.Instance, clock: opts.Clock,
		log: opts.Logger.Named("dcs-etcd").With(zap.String("cluster", opts.Cluster), zap.String("member", opts.Member),
			zap.String("instance", opts.Instance)),
		memberTTL: opts.MemberTTL, memberRefresh: opts.MemberRefresh,
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

// ---- watch-fed cache ----

func (s *Store) run() {
	defer close(s.done)
	backoff := 50 * time.Millisecond
	for s.ctx.Err() == nil {
		rev, err := s.list()
		if err == nil {
			backoff = 50 * time.Millisecond
			err = s.watch(rev)
		}
		if s.ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		s.log.Info("etcd watch interrupted, re-listing", zap.Error(err), zap.Duration("backoff", backoff))
		// A real timer: this is plumbing, not a judged duration, and must
		// not stall under a test's fake clock.
		t := time.NewTimer(backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (s *Store) list() (int64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, listTimeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, mapErr("listing "+s.prefix, err)
	}
	s.mu.Lock()
	now := s.clock.Now()
	seen := make(map[string]bool, len(resp.Kvs))
	changed := !s.synced
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		seen[k] = true
		if old, ok := s.kvs[k]; !ok || old.ModRevision != kv.ModRevision {
			s.observed[k] = now
			changed = true
		}
		s.kvs[k] = kv
	}
	for k := range s.kvs {
		if !seen[k] {
			delete(s.kvs, k)
			delete(s.observed, k)
			changed = true
		}
	}
	s.setRev(resp.Header.Revision)
	s.lastErr = nil
	if !s.synced {
		s.synced = true
		close(s.syncedCh)
	}
	s.mu.Unlock()
	if changed {
		s.notify()
	}
	return resp.Header.Revision, nil
}

func (s *Store) watch(rev int64) error {
	// RequireLeader: a member cut off from its quorum cancels the watch
	// instead of serving silence.
	wch := s.cli.Watch(clientv3.WithRequireLeader(s.ctx), s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return mapErr("watching "+s.prefix, err)
		}
		if len(wr.Events) == 0 {
			continue
		}
		s.mu.Lock()
		now := s.clock.Now()
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				delete(s.kvs, k)
				delete(s.observed, k)
			} else {
				s.kvs[k] = ev.Kv
				s.observed[k] = now
			}
		}
		s.setRev(wr.Header.Revision)
		s.mu.Unlock()
		s.notify()
	}
	return fmt.Errorf("%w: watch on %s closed", dcs.ErrUnreachable, s.prefix)
}

// setRev records the cache's revision; s.mu is held.
func (s *Store) setRev(rev int64) {
	if rev > s.rev {
		s.rev = rev
		close(s.revCh)
		s.revCh = make(chan struct{})
	}
}

// catchUp waits until the cache reflects revision rev, so that a member's
// next snapshot shows its own write (read-your-writes).
func (s *Store) catchUp(ctx context.Context, rev int64) {
	t := time.NewTimer(catchUpTimeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		done, ch := s.rev >= rev, s.revCh
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-t.C:
			s.log.Debug("watch did not deliver own write in time", zap.Int64("revision", rev))
			return
		}
	}
}

func (s *Store) notify() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// waitSynced waits for the first list.
func (s *Store) waitSynced(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	select {
	case <-s.syncedCh:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	last := s.lastErr
	s.mu.Unlock()
	if errors.Is(ctx.Err(), context.Canceled) {
		return mapErr(op, ctx.Err())
	}
	if errors.Is(last, dcs.ErrForbidden) {
		return fmt.Errorf("%s: %w", op, last)
	}
	return fmt.Errorf("%s: %w: no successful read of %s yet (last error: %v)", op, dcs.ErrUnreachable, s.prefix, last)
}

// cached returns the cached key and when it was observed to change.
func (s *Store) cached(k string) (*mvccpb.KeyValue, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kvs[s.key(k)], s.observed[s.key(k)]
}

func parseLeader(where string, b []byte) (leaderJSON, error) {
	var j leaderJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return j, record.Corrupt(where, "leader record is not valid JSON", err)
	}
	var errs []error
	if err := dcs.ValidateName("holder", j.Holder); err != nil {
		errs = append(errs, err)
	}
	if j.Instance != "" {
		if err := dcs.ValidateInstance(j.Instance); err != nil {
			errs = append(errs, err)
		}
	}
	if ttl := time.Duration(j.TTLSeconds) * time.Second; j.TTLSeconds <= 0 || ttl > dcs.MaxTTL || ttl < dcs.MinTTL {
		errs = append(errs, fmt.Errorf("impossible ttl_seconds %d (want %v..%v)", j.TTLSeconds, dcs.MinTTL, dcs.MaxTTL))
	}
	if j.AcquiredAt.IsZero() {
		errs = append(errs, errors.New("acquired_at is missing"))
	}
	if len(errs) > 0 {
		return j, record.Corrupt(where, "invalid leader record", errors.Join(errs...))
	}
	return j, nil
}

// Cluster implements dcs.Store.
func (s *Store) Cluster(ctx context.Context) (*dcs.Cluster, error) {
	const op = "reading cluster"
	if err := s.waitSynced(ctx, op); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	c := &dcs.Cluster{Name: s.cluster, Config: s.lastConfig, ReadAt: now}
	if kv := s.kvs[s.key("config")]; kv != nil {
		cfg, err := record.DecodeConfig(string(kv.Key), kv.Value)
		if err != nil {
			c.Problems = append(c.Problems, err)
			c.ConfigErr = err
		} else {
			c.Config, s.lastConfig = cfg, cfg
		}
		c.ConfigVersion = ver(kv)
	}
	if kv := s.kvs[s.key("leader")]; kv != nil {
		c.Leader = s.leaderOf(kv, s.observed[string(kv.Key)], c.Config.TTL, now)
		if c.Leader.Err != nil {
			c.Problems = append(c.Problems, c.Leader.Err)
		}
	}
	mprefix := s.key("members/")
	for k, kv := range s.kvs {
		name, ok := strings.CutPrefix(k, mprefix)
		if !ok {
			continue
		}
		m, err := record.DecodeMember(k, name, kv.Value)
		if err != nil {
			c.Problems = append(c.Problems, err)
			continue
		}
		m.Version, m.ObservedAt = ver(kv), s.observed[k]
		c.Members = append(c.Members, m)
	}
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].Name < c.Members[j].Name })
	if kv := s.kvs[s.key("switchover")]; kv != nil {
		sw, err := record.DecodeSwitchover(string(kv.Key), kv.Value)
		if err != nil {
			c.Problems = append(c.Problems, err)
			sw.Err = err
		}
		sw.Version = ver(kv)
		c.Switchover = &sw
	}
	if kv := s.kvs[s.key("initialized")]; kv != nil {
		in, err := record.DecodeInitialized(string(kv.Key), kv.Value)
		if err != nil {
			c.Problems = append(c.Problems, err)
			in.Err = err
		}
		in.Version = ver(kv)
		c.Initialized = &in
	}
	if kv := s.kvs[s.key("history")]; kv != nil {
		h, err := record.DecodeHistory(string(kv.Key), kv.Value)
		if err != nil {
			c.Problems = append(c.Problems, err)
		}
		c.History = h
	}
	return c, nil
}

// leaderOf reads the leader key. A leased key is valid until etcd deletes
// it; an unleased one expires ttl after it was observed to change, with its
// declared ttl, or the config's when the record is unreadable.
func (s *Store) leaderOf(kv *mvccpb.KeyValue, observed time.Time, cfgTTL time.Duration, now time.Time) *dcs.Leader {
	l := &dcs.Leader{Version: ver(kv), ObservedAt: observed, TTL: cfgTTL}
	j, err := parseLeader(string(kv.Key), kv.Value)
	if err != nil {
		l.Holder, l.Err = dcs.UnknownHolder, err
	} else {
		l.Holder, l.Instance, l.TTL, l.AcquiredAt = j.Holder, j.Instance, time.Duration(j.TTLSeconds)*time.Second, j.AcquiredAt
	}
	if kv.Lease == 0 {
		l.Expired = !now.Before(observed.Add(l.TTL))
	}
	return l
}

func ver(kv *mvccpb.KeyValue) string { return strconv.FormatInt(kv.ModRevision, 10) }

// ---- leader lock ----

func ttlSeconds(ttl time.Duration) int64 { return int64(ttl / time.Second) }

func (s *Store) leaderValue(holder, instance string, ttl time.Duration, acquired time.Time) []byte {
	b, _ := json.Marshal(leaderJSON{Holder: holder, Instance: instance, TTLSeconds: ttlSeconds(ttl), AcquiredAt: acquired.UTC()})
	return b
}

// holderOf names the holder in a txn's Else(Get) response, for errors.
func (s *Store) holderOf(resp *clientv3.TxnResponse) string {
	for _, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			return s.holderOfKV(rr.Kvs[0])
		}
	}
	return "nobody"
}

// holderOfKV names the holder recorded in a leader key, for errors.
func (s *Store) holderOfKV(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return "nobody"
	}
	j, err := parseLeader("", kv.Value)
	if err != nil {
		return dcs.UnknownHolder
	}
	return record.HolderDescription(s.name, s.instance, j.Holder, j.Instance)
}

// guard is the fencing comparison of a tenure.
func (s *Store) guard(h *hold) []clientv3.Cmp {
	k := s.key("leader")
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(k), "=", h.createRev),
		clientv3.Compare(clientv3.Value(k), "=", string(h.value)),
	}
}

func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if _, err := s.cli.Revoke(ctx, id); err != nil {
		s.log.Debug("revoking lease", zap.Int64("lease", int64(id)), zap.Error(err))
	}
}

// AcquireLeader implements dcs.Store.
func (s *Store) AcquireLeader(ctx context.Context, ttl time.Duration) error {
	const op = "acquiring leader lock"
	if err := dcs.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	k := s.key("leader")
	kv, observed := s.cached("leader")
	if kv != nil {
		s.mu.Lock()
		cfgTTL := s.lastConfig.TTL
		s.mu.Unlock()
		l := s.leaderOf(kv, observed, cfgTTL, s.clock.Now())
		switch {
		case l.Err == nil && l.Holder == s.name && l.Instance == s.instance && kv.Lease != 0:
			// Ours already (acquired before, or handed to us): adopt and
			// renew. A restarted agent is a new instance and waits for expiry.
			s.held = &hold{lease: clientv3.LeaseID(kv.Lease), createRev: kv.CreateRevision, value: kv.Value, ttl: l.TTL}
			err := s.renewLocked(ctx, op, ttl)
			if errors.Is(err, dcs.ErrNotLeader) {
				// Our cached tenure is gone (the cache lags).
				return fmt.Errorf("%s: %w: the lock changed since observed: %v", op, dcs.ErrConflict, err)
			}
			return err
		case kv.Lease != 0:
			return fmt.Errorf("%s: %w: held by %s until its etcd lease %x expires%s", op, dcs.ErrHeld,
				record.HolderDescription(s.name, s.instance, l.Holder, l.Instance), kv.Lease, errSuffix(l.Err))
		case !l.Expired:
			return fmt.Errorf("%s: %w: held by %s with no lease; it can be replaced after it stays unchanged for %v%s",
				op, dcs.ErrHeld, record.HolderDescription(s.name, s.instance, l.Holder, l.Instance), l.TTL, errSuffix(l.Err))
		}
		// An expired unleased key: remove it, guarded on the revision we
		// judged, then race like everybody else.
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			return mapErr(op, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("%s: %w: the unleased leader key changed before it could be replaced", op, dcs.ErrConflict)
		}
		s.log.Warn("replaced an unleased leader key", zap.String("holder", l.Holder), zap.Error(l.Err))
	}
	grant, err := s.cli.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return mapErr(op, err)
	}
	value := s.leaderValue(s.name, s.instance, ttl, s.clock.Now())
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(value), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		// The outcome is unknown; if the put landed, the lease is ours to
		// adopt on the next call, so do not revoke it blindly.
		return mapErr(op, err)
	}
	if !resp.Succeeded {
		s.revoke(grant.ID)
		return fmt.Errorf("%s: %w: %s took the lock first", op, dcs.ErrConflict, s.holderOf(resp))
	}
	s.held = &hold{lease: grant.ID, createRev: resp.Header.Revision, value: value, ttl: ttl}
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (%v)", err)
}

// adopt makes s.held describe the tenure if this member and instance hold
// the lock: from the cache, then, if the cache does not show them holding it
// (it may lag a hand-over to us), from a linearizable read. A key naming
// this member with another instance is another agent's tenure.
func (s *Store) adopt(ctx context.Context, op string) error {
	if s.held != nil {
		return nil
	}
	try := func(kv *mvccpb.KeyValue) bool {
		if kv == nil || kv.Lease == 0 {
			return false
		}
		j, err := parseLeader(string(kv.Key), kv.Value)
		if err != nil || j.Holder != s.name || j.Instance != s.instance {
			return false
		}
		s.held = &hold{lease: clientv3.LeaseID(kv.Lease), createRev: kv.CreateRevision, value: kv.Value, ttl: time.Duration(j.TTLSeconds) * time.Second}
		return true
	}
	if kv, _ := s.cached("leader"); try(kv) {
		return nil
	}
	resp, err := s.cli.Get(ctx, s.key("leader"))
	if err != nil {
		return mapErr(op, err)
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	if try(kv) {
		return nil
	}
	return fmt.Errorf("%s: %w: held by %s", op, dcs.ErrNotLeader, s.holderOfKV(kv))
}

// RenewLeader implements dcs.Store: KeepAliveOnce on the lock lease, then a
// transaction verifying that the key still carries this tenure's create
// revision and value. Both must succeed.
func (s *Store) RenewLeader(ctx context.Context, ttl time.Duration) error {
	const op = "renewing leader lock"
	if err := dcs.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if err := s.adopt(ctx, op); err != nil {
		return err
	}
	return s.renewLocked(ctx, op, ttl)
}

func (s *Store) renewLocked(ctx context.Context, op string, ttl time.Duration) error {
	h := s.held
	k := s.key("leader")
	if ttl != h.ttl {
		return s.rebind(ctx, op, ttl)
	}
	if _, err := s.cli.KeepAliveOnce(ctx, h.lease); err != nil {
		if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
			s.held = nil
			return fmt.Errorf("%s: %w: the lock lease expired", op, dcs.ErrNotLeader)
		}
		return mapErr(op, err)
	}
	resp, err := s.cli.Txn(ctx).If(s.guard(h)...).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return mapErr(op, err)
	}
	if !resp.Succeeded {
		s.held = nil
		return fmt.Errorf("%s: %w: held by %s", op, dcs.ErrNotLeader, s.holderOf(resp))
	}
	return nil
}

// rebind moves the key to a new lease with a new ttl (the config's ttl
// changed), keeping the tenure's create revision.
func (s *Store) rebind(ctx context.Context, op string, ttl time.Duration) error {
	h := s.held
	k := s.key("leader")
	grant, err := s.cli.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return mapErr(op, err)
	}
	var acquired time.Time
	if j, err := parseLeader(k, h.value); err == nil {
		acquired = j.AcquiredAt
	}
	value := s.leaderValue(s.name, s.instance, ttl, acquired)
	resp, err := s.cli.Txn(ctx).If(s.guard(h)...).
		Then(clientv3.OpPut(k, string(value), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return mapErr(op, err)
	}
	if !resp.Succeeded {
		s.revoke(grant.ID)
		s.held = nil
		return fmt.Errorf("%s: %w: held by %s", op, dcs.ErrNotLeader, s.holderOf(resp))
	}
	s.revoke(h.lease)
	s.held = &hold{lease: grant.ID, createRev: h.createRev, value: value, ttl: ttl}
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}

// ReleaseLeader implements dcs.Store: a guarded delete, then the lock lease
// is revoked.
func (s *Store) ReleaseLeader(ctx context.Context) error {
	const op = "releasing leader lock"
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if err := s.adopt(ctx, op); err != nil {
		return err
	}
	h := s.held
	k := s.key("leader")
	resp, err := s.cli.Txn(ctx).If(s.guard(h)...).Then(clientv3.OpDelete(k)).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return mapErr(op, err)
	}
	s.held = nil
	if !resp.Succeeded {
		return fmt.Errorf("%s: %w: held by %s", op, dcs.ErrNotLeader, s.holderOf(resp))
	}
	s.revoke(h.lease)
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}

// HandoverLeader implements dcs.Store: one guarded transaction rewrites the
// key to name `to` and toInstance, bound to a fresh lease of the same ttl,
// which the store of `to` and toInstance adopts from the key. The old lease
// is then revoked.
func (s *Store) HandoverLeader(ctx context.Context, to, toInstance string) error {
	op := "handing leader lock over to " + to
	if err := dcs.ValidateHandover(s.name, to, toInstance); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if err := s.adopt(ctx, op); err != nil {
		return err
	}
	h := s.held
	k := s.key("leader")
	grant, err := s.cli.Grant(ctx, ttlSeconds(h.ttl))
	if err != nil {
		return mapErr(op, err)
	}
	value := s.leaderValue(to, toInstance, h.ttl, s.clock.Now())
	resp, err := s.cli.Txn(ctx).If(s.guard(h)...).
		Then(clientv3.OpPut(k, string(value), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return mapErr(op, err)
	}
	s.held = nil
	if !resp.Succeeded {
		s.revoke(grant.ID)
		return fmt.Errorf("%s: %w: held by %s", op, dcs.ErrNotLeader, s.holderOf(resp))
	}
	s.revoke(h.lease)
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}

// ---- member record ----

// ensureSession returns the member session lease, granting a new one (and
// starting its background keep-alive) when there is none.
func (s *Store) ensureSession(ctx context.Context, op string) (clientv3.LeaseID, bool, error) {
	s.mu.Lock()
	id := s.session
	s.mu.Unlock()
	if id != 0 {
		return id, false, nil
	}
	grant, err := s.cli.Grant(ctx, ttlSeconds(s.memberTTL))
	if err != nil {
		return 0, false, mapErr(op, err)
	}
	ch, err := s.cli.KeepAlive(s.ctx, grant.ID)
	if err != nil {
		s.revoke(grant.ID)
		return 0, false, mapErr(op, err)
	}
	s.mu.Lock()
	s.session = grant.ID
	s.mu.Unlock()
	go func() {
		for range ch {
		}
		// The lease expired, was revoked, or the store closed: the next
		// UpdateMember grants a new session and rewrites the record.
		s.mu.Lock()
		if s.session == grant.ID {
			s.session = 0
		}
		s.mu.Unlock()
		if s.ctx.Err() == nil {
			s.log.Warn("member session lease lost", zap.Int64("lease", int64(grant.ID)))
		}
	}()
	return grant.ID, true, nil
}

// UpdateMember implements dcs.Store.
func (s *Store) UpdateMember(ctx context.Context, m dcs.Member) error {
	const op = "updating member record"
	now := s.clock.Now()
	m, data, err := record.PrepareMember(s.name, s.instance, m, now)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	s.memberMu.Lock()
	defer s.memberMu.Unlock()
	lease, fresh, err := s.ensureSession(ctx, op)
	if err != nil {
		return err
	}
	k := s.key("members/" + s.name)
	s.mu.Lock()
	_, present := s.kvs[k]
	vanished := !present && s.rev >= s.lastRev // deleted, not merely not yet seen
	need := fresh || vanished || record.MemberNeedsWrite(s.lastMember, s.lastAt, m, now, s.memberRefresh)
	s.mu.Unlock()
	if !need {
		return nil
	}
	resp, err := s.cli.Put(ctx, k, string(data), clientv3.WithLease(lease))
	if err != nil {
		return mapErr(op, err)
	}
	s.mu.Lock()
	s.lastMember, s.lastAt, s.lastRev = &m, now, resp.Header.Revision
	s.mu.Unlock()
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}

// ---- cluster state ----

// cas puts value at key k (deletes it when value is nil) if its mod revision
// is still version ("" for absent). It returns whether it succeeded and the
// current key otherwise.
func (s *Store) cas(ctx context.Context, k, version string, value []byte) (bool, *mvccpb.KeyValue, error) {
	cmp := clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	if version != "" {
		rev, err := strconv.ParseInt(version, 10, 64)
		if err != nil {
			return false, nil, fmt.Errorf("%w: version %q is not an etcd revision", dcs.ErrConflict, version)
		}
		cmp = clientv3.Compare(clientv3.ModRevision(k), "=", rev)
	}
	op := clientv3.OpPut(k, string(value))
	if value == nil {
		op = clientv3.OpDelete(k)
	}
	resp, err := s.cli.Txn(ctx).If(cmp).Then(op).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return false, nil, err
	}
	if resp.Succeeded {
		s.catchUp(ctx, resp.Header.Revision)
		return true, nil, nil
	}
	var cur *mvccpb.KeyValue
	if rr := resp.Responses[0].GetResponseRange(); len(rr.Kvs) > 0 {
		cur = rr.Kvs[0]
	}
	return false, cur, nil
}

// SetConfig implements dcs.Store.
func (s *Store) SetConfig(ctx context.Context, cfg dcs.Config, version string) error {
	const op = "setting cluster config"
	data, err := record.EncodeConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	ok, cur, err := s.cas(ctx, s.key("config"), version, data)
	if err != nil {
		return mapErr(op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w: config version is %s, caller expected %q", op, dcs.ErrConflict, kvVer(cur), version)
	}
	return nil
}

func kvVer(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return `"" (absent)`
	}
	return strconv.Quote(ver(kv))
}

// RequestSwitchover implements dcs.Store.
func (s *Store) RequestSwitchover(ctx context.Context, sw dcs.Switchover) error {
	const op = "requesting switchover"
	if sw.RequestedAt.IsZero() {
		sw.RequestedAt = s.clock.Now()
	}
	data, err := record.EncodeSwitchover(sw)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, "switchover", data, "a switchover request is already pending")
}

// createOnce writes key only if it does not exist; ErrExists (with what and
// the stored value) otherwise.
func (s *Store) createOnce(ctx context.Context, op, key string, data []byte, what string) error {
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	ok, cur, err := s.cas(ctx, s.key(key), "", data)
	if err != nil {
		return mapErr(op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w: %s: %s", op, dcs.ErrExists, what, bytes.TrimSpace(cur.Value))
	}
	return nil
}

// ClearSwitchover implements dcs.Store.
func (s *Store) ClearSwitchover(ctx context.Context, version string) error {
	const op = "clearing switchover request"
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	if version == "" {
		return fmt.Errorf("%s: %w: empty version", op, dcs.ErrInvalid)
	}
	ok, cur, err := s.cas(ctx, s.key("switchover"), version, nil)
	if err != nil {
		return mapErr(op, err)
	}
	switch {
	case ok:
		return nil
	case cur == nil:
		return fmt.Errorf("%s: %w: no switchover request is pending", op, dcs.ErrNotFound)
	default:
		return fmt.Errorf("%s: %w: request version is %s, caller expected %q", op, dcs.ErrConflict, kvVer(cur), version)
	}
}

// SetInitialized implements dcs.Store.
func (s *Store) SetInitialized(ctx context.Context, in dcs.Initialized) error {
	const op = "recording cluster initialization"
	if in.At.IsZero() {
		in.At = s.clock.Now()
	}
	data, err := record.EncodeInitialized(in)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, "initialized", data, "cluster already initialized")
}

// AppendHistory implements dcs.Store. A stored history that cannot be read
// is replaced (it was already reported in Cluster.Problems).
func (s *Store) AppendHistory(ctx context.Context, e dcs.HistoryEntry) error {
	const op = "appending history"
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	k := s.key("history")
	cur, _ := s.cached("history")
	for attempt := 0; attempt < casAttempts; attempt++ {
		var h []dcs.HistoryEntry
		version := ""
		if cur != nil {
			version = ver(cur)
			if old, err := record.DecodeHistory(k, cur.Value); err == nil {
				h = old
			} else {
				s.log.Warn("replacing unreadable history", zap.Error(err))
			}
		}
		data, err := record.EncodeHistory(record.AppendHistory(h, e))
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		ok, now, err := s.cas(ctx, k, version, data)
		if err != nil {
			return mapErr(op, err)
		}
		if ok {
			return nil
		}
		cur = now
	}
	return fmt.Errorf("%s: %w: lost the compare-and-set %d times", op, dcs.ErrConflict, casAttempts)
}
