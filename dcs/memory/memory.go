// Package memory is an in-process DCS for fast unit tests of the agent: one
// Server holds the records of one cluster and hands out a dcs.Store per
// member. It has the semantics of the Kubernetes backend (expiry judged on
// each store's own injected clock from when it observed the last change;
// every write a compare-and-set) and passes the same contract suite
// (dcs/dcstest), plus controls real backends lack: Partition and Heal a
// member, and ExpireLeader.
//
// A partitioned store keeps serving its last snapshot, as a real backend's
// watch cache does, and every call it makes to the Server fails with
// dcs.ErrUnreachable; it sees no changes until healed.
//
// Production code never imports this package.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// Records are immutable once stored: the Server replaces them, so stores can
// share pointers.
type leaderRec struct {
	holder                string // "" once released or expired
	instance              string // the holder's agent instance id
	ttl                   time.Duration
	acquiredAt, renewedAt time.Time
	transitions           int64
	rev                   int64
}

type memberRec struct {
	m   dcs.Member
	ttl time.Duration
	rev int64
}

type configRec struct {
	cfg dcs.Config
	rev int64
}

type switchoverRec struct {
	sw  dcs.Switchover
	rev int64
}

type initializedRec struct {
	in  dcs.Initialized
	rev int64
}

type historyRec struct {
	h   []dcs.HistoryEntry
	rev int64
}

// state is the whole content of a cluster.
type state struct {
	leader      *leaderRec
	members     map[string]*memberRec
	config      *configRec
	switchover  *switchoverRec
	initialized *initializedRec
	history     *historyRec
}

// revs lists each record's revision by key, 0 when absent.
func (st *state) revs() map[string]int64 {
	r := make(map[string]int64, 5+len(st.members))
	if st.leader != nil {
		r["leader"] = st.leader.rev
	}
	for n, m := range st.members {
		r["members/"+n] = m.rev
	}
	if st.config != nil {
		r["config"] = st.config.rev
	}
	if st.switchover != nil {
		r["switchover"] = st.switchover.rev
	}
	if st.initialized != nil {
		r["initialized"] = st.initialized.rev
	}
	if st.history != nil {
		r["history"] = st.history.rev
	}
	return r
}

// Server is the shared, linearizable store of one cluster.
type Server struct {
	cluster string

	mu          sync.Mutex
	rev         int64
	st          state
	stores      map[*Store]struct{}
	partitioned map[string]bool
	requests    int64
}

// NewServer returns an empty cluster named cluster.
func NewServer(cluster string) *Server {
	return &Server{
		cluster:     cluster,
		st:          state{members: map[string]*memberRec{}},
		stores:      map[*Store]struct{}{},
		partitioned: map[string]bool{},
	}
}

// Partition makes every call of member's stores fail with dcs.ErrUnreachable
// and freezes their snapshots, until Heal.
func (srv *Server) Partition(member string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.partitioned[member] = true
}

// Heal ends a Partition; the member's stores catch up at once.
func (srv *Server) Heal(member string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	delete(srv.partitioned, member)
	srv.syncLocked()
}

// ExpireLeader makes the lock expire now, as if its holder had stopped
// renewing for ttl: the holder's RenewLeader fails with ErrNotLeader and
// others may acquire at once.
func (srv *Server) ExpireLeader() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if l := srv.st.leader; l != nil && l.holder != "" {
		n := *l
		n.holder, n.instance = "", ""
		n.rev = srv.nextRev()
		srv.st.leader = &n
		srv.syncLocked()
	}
}

// Holder returns the current lock holder, "" for none.
func (srv *Server) Holder() string {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.st.leader == nil {
		return ""
	}
	return srv.st.leader.holder
}

// Requests returns how many calls the stores made to the Server.
func (srv *Server) Requests() int64 {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.requests
}

func (srv *Server) nextRev() int64 {
	srv.rev++
	return srv.rev
}

// syncLocked pushes the current state to every reachable store.
func (srv *Server) syncLocked() {
	revs := srv.st.revs()
	for s := range srv.stores {
		if !srv.partitioned[s.name] {
			s.sync(srv.st, revs)
		}
	}
}

// do runs one request of store s against the state: fn mutates srv.st and
// returns whether it changed anything.
func (srv *Server) do(ctx context.Context, s *Store, op string, fn func(now time.Time) (bool, error)) error {
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.requests++
	if srv.partitioned[s.name] {
		return fmt.Errorf("%s: %w: member %s is partitioned from the memory server", op, dcs.ErrUnreachable, s.name)
	}
	changed, err := fn(s.clock.Now())
	if changed {
		srv.syncLocked()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// mapErr is the one place that maps this backend's native errors (only
// context errors here) to dcs sentinels.
func mapErr(op string, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: %w", op, dcs.ErrUnreachable, err)
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// Options configure a Store.
type Options struct {
	// Member is this store's member name (required).
	Member string
	// Instance is the agent instance id this store writes into the lock and
	// the member record (dcs.ValidateInstance); a random one when empty.
	// Stores of one Member with different Instances are different agents.
	Instance string
	// Clock judges expiry and staleness; clock.RealClock{} when nil.
	Clock clock.Clock
	// Logger; zap.NewNop() when nil.
	Logger *zap.Logger
	// MemberTTL is how long this member's record counts as fresh after a
	// write, as judged by observers; dcs.DefaultMemberTTL when 0.
	MemberTTL time.Duration
	// MemberRefresh is the longest UpdateMember goes without writing;
	// dcs.DefaultMemberRefresh when 0; must be below MemberTTL.
	MemberRefresh time.Duration
}

type observation struct {
	rev int64
	at  time.Time
}

// Store is one member's view of the Server.
type Store struct {
	srv                      *Server
	name, instance           string
	clock                    clock.Clock
	log                      *zap.Logger
	memberTTL, memberRefresh time.Duration
	changes                  chan struct{}

	mu         sync.Mutex
	view       state
	obs        map[string]observation
	lastMember *dcs.Member // last record written, for the write-rate policy
	lastAt     time.Time
	lastRev    int64
	synced     bool // the view was filled at least once
}

var _ dcs.Store = (*Store)(nil)

// NewStore returns a store for opts.Member, synced with the Server unless
// the member is partitioned.
func (srv *Server) NewStore(opts Options) (*Store, error) {
	if err := dcs.ValidateName("member", opts.Member); err != nil {
		return nil, err
	}
	var err error
	if opts.Instance, err = record.StoreInstance(opts.Instance); err != nil {
		return nil, err
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
	s := &Store{
		srv: srv, name: opts.Member, instance: opts.Instance, clock: opts.Clock,
		log: opts.Logger.Named("dcs-memory").With(zap.String("cluster", srv.cluster), zap.String("member", opts.Member),
			zap.String("instance", opts.Instance)),
		memberTTL: opts.MemberTTL, memberRefresh: opts.MemberRefresh,
		changes: make(chan struct{}, 1),
		obs:     map[string]observation{},
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.stores[s] = struct{}{}
	if !srv.partitioned[s.name] {
		s.sync(srv.st, srv.st.revs())
	}
	return s, nil
}

// sync updates the view; the caller holds srv.mu.
func (s *Store) sync(st state, revs map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	changed := false
	for k, r := range revs {
		if o, ok := s.obs[k]; !ok || o.rev != r {
			s.obs[k] = observation{rev: r, at: now}
			changed = true
		}
	}
	for k := range s.obs {
		if _, ok := revs[k]; !ok {
			delete(s.obs, k)
			changed = true
		}
	}
	st.members = copyMap(st.members)
	s.view = st
	s.synced = true
	if changed {
		select {
		case s.changes <- struct{}{}:
		default:
		}
	}
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Member implements dcs.Store.
func (s *Store) Member() string { return s.name }

// Instance implements dcs.Store.
func (s *Store) Instance() string { return s.instance }

// ours reports whether the lock record l names this store's member and
// instance.
func (s *Store) ours(l *leaderRec) bool { return l.holder == s.name && l.instance == s.instance }

// holderOf names l's holder for this store's errors.
func (s *Store) holderOf(l *leaderRec) string {
	return record.HolderDescription(s.name, s.instance, l.holder, l.instance)
}

// Changes implements dcs.Store.
func (s *Store) Changes() <-chan struct{} { return s.changes }

// Close implements dcs.Store: the store stops receiving changes.
func (s *Store) Close() error {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	delete(s.srv.stores, s)
	return nil
}

func version(rev int64) string { return strconv.FormatInt(rev, 10) }

// Cluster implements dcs.Store.
func (s *Store) Cluster(ctx context.Context) (*dcs.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, mapErr("reading cluster", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		// As a real backend before its first list: nothing to serve.
		return nil, fmt.Errorf("reading cluster: %w: member %s has been partitioned since it started", dcs.ErrUnreachable, s.name)
	}
	now := s.clock.Now()
	c := &dcs.Cluster{Name: s.srv.cluster, Config: dcs.DefaultConfig(), ReadAt: now}
	v := s.view
	if l := v.leader; l != nil && l.holder != "" {
		at := s.obs["leader"].at
		c.Leader = &dcs.Leader{
			Holder: l.holder, Instance: l.instance, Version: version(l.rev), TTL: l.ttl,
			AcquiredAt: l.acquiredAt, RenewedAt: l.renewedAt, Transitions: l.transitions,
			ObservedAt: at, Expired: !now.Before(at.Add(l.ttl)),
		}
	}
	for n, r := range v.members {
		m := r.m
		m.Version = version(r.rev)
		m.ObservedAt = s.obs["members/"+n].at
		m.Stale = !now.Before(m.ObservedAt.Add(r.ttl))
		c.Members = append(c.Members, m)
	}
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].Name < c.Members[j].Name })
	if v.config != nil {
		c.Config, c.ConfigVersion = v.config.cfg, version(v.config.rev)
	}
	if v.switchover != nil {
		sw := v.switchover.sw
		sw.Version = version(v.switchover.rev)
		c.Switchover = &sw
	}
	if v.initialized != nil {
		in := v.initialized.in
		in.Version = version(v.initialized.rev)
		c.Initialized = &in
	}
	if v.history != nil {
		c.History = append([]dcs.HistoryEntry(nil), v.history.h...)
	}
	return c, nil
}

// AcquireLeader implements dcs.Store. The expiry rule is judged on this
// store's view and clock; the Server then compares the revision this store
// observed, so a change it has not seen makes the call fail with
// ErrConflict.
func (s *Store) AcquireLeader(ctx context.Context, ttl time.Duration) error {
	const op = "acquiring leader lock"
	if err := dcs.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.mu.Lock()
	l, o := s.view.leader, s.obs["leader"]
	now := s.clock.Now()
	s.mu.Unlock()
	var seen int64
	if l != nil {
		seen = l.rev
		if l.holder != "" && !s.ours(l) {
			if age := now.Sub(o.at); age < l.ttl {
				return fmt.Errorf("%s: %w: held by %s, unchanged for %v of its %v ttl", op, dcs.ErrHeld, s.holderOf(l), age, l.ttl)
			}
		}
	}
	return s.srv.do(ctx, s, op, func(now time.Time) (bool, error) {
		cur := s.srv.st.leader
		var curRev int64
		if cur != nil {
			curRev = cur.rev
		}
		if curRev != seen {
			return false, fmt.Errorf("%w: lock record changed since observed (revision %d, observed %d)", dcs.ErrConflict, curRev, seen)
		}
		n := leaderRec{holder: s.name, instance: s.instance, ttl: ttl, acquiredAt: now, renewedAt: now, rev: s.srv.nextRev()}
		if cur != nil {
			n.transitions = cur.transitions
			if s.ours(cur) {
				n.acquiredAt = cur.acquiredAt
			} else {
				n.transitions++
			}
		}
		s.srv.st.leader = &n
		return true, nil
	})
}

// holding returns the lock record if s's member and instance hold it;
// srv.mu is held.
func (s *Store) holding() (*leaderRec, error) {
	cur := s.srv.st.leader
	if cur == nil || cur.holder == "" {
		return nil, fmt.Errorf("%w: nobody holds the lock", dcs.ErrNotLeader)
	}
	if !s.ours(cur) {
		return nil, fmt.Errorf("%w: held by %s", dcs.ErrNotLeader, s.holderOf(cur))
	}
	return cur, nil
}

// RenewLeader implements dcs.Store.
func (s *Store) RenewLeader(ctx context.Context, ttl time.Duration) error {
	const op = "renewing leader lock"
	if err := dcs.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(now time.Time) (bool, error) {
		cur, err := s.holding()
		if err != nil {
			return false, err
		}
		n := *cur
		n.ttl, n.renewedAt, n.rev = ttl, now, s.srv.nextRev()
		s.srv.st.leader = &n
		return true, nil
	})
}

// ReleaseLeader implements dcs.Store.
func (s *Store) ReleaseLeader(ctx context.Context) error {
	return s.srv.do(ctx, s, "releasing leader lock", func(now time.Time) (bool, error) {
		cur, err := s.holding()
		if err != nil {
			return false, err
		}
		n := *cur
		n.holder, n.renewedAt, n.rev = "", now, s.srv.nextRev()
		s.srv.st.leader = &n
		return true, nil
	})
}

// HandoverLeader implements dcs.Store.
func (s *Store) HandoverLeader(ctx context.Context, to, toInstance string) error {
	op := "handing leader lock over to " + to
	if err := dcs.ValidateHandover(s.name, to, toInstance); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(now time.Time) (bool, error) {
		cur, err := s.holding()
		if err != nil {
			return false, err
		}
		n := *cur
		n.holder, n.instance, n.acquiredAt, n.renewedAt, n.rev = to, toInstance, now, now, s.srv.nextRev()
		n.transitions++
		s.srv.st.leader = &n
		return true, nil
	})
}

// UpdateMember implements dcs.Store.
func (s *Store) UpdateMember(ctx context.Context, m dcs.Member) error {
	const op = "updating member record"
	now := s.clock.Now()
	m, _, err := record.PrepareMember(s.name, s.instance, m, now)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.mu.Lock()
	last, lastAt, lastRev := s.lastMember, s.lastAt, s.lastRev
	s.mu.Unlock()
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		cur := s.srv.st.members[s.name]
		// Write when the stored record is not the one we last wrote (gone,
		// or first write) or the policy says so.
		if cur != nil && cur.rev == lastRev && !record.MemberNeedsWrite(last, lastAt, m, now, s.memberRefresh) {
			return false, nil
		}
		r := &memberRec{m: m, ttl: s.memberTTL, rev: s.srv.nextRev()}
		s.srv.st.members[s.name] = r
		s.mu.Lock()
		s.lastMember, s.lastAt, s.lastRev = &m, now, r.rev
		s.mu.Unlock()
		return true, nil
	})
}

// SetConfig implements dcs.Store.
func (s *Store) SetConfig(ctx context.Context, cfg dcs.Config, ver string) error {
	const op = "setting cluster config"
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		cur := ""
		if c := s.srv.st.config; c != nil {
			cur = version(c.rev)
		}
		if cur != ver {
			return false, fmt.Errorf("%w: config version is %q, caller expected %q", dcs.ErrConflict, cur, ver)
		}
		s.srv.st.config = &configRec{cfg: cfg, rev: s.srv.nextRev()}
		return true, nil
	})
}

// RequestSwitchover implements dcs.Store.
func (s *Store) RequestSwitchover(ctx context.Context, sw dcs.Switchover) error {
	const op = "requesting switchover"
	if sw.RequestedAt.IsZero() {
		sw.RequestedAt = s.clock.Now()
	}
	sw.Version, sw.Err = "", nil
	if err := record.ValidateSwitchover(sw); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if cur := s.srv.st.switchover; cur != nil {
			return false, fmt.Errorf("%w: a switchover from %q to %q is already pending", dcs.ErrExists, cur.sw.From, cur.sw.To)
		}
		s.srv.st.switchover = &switchoverRec{sw: sw, rev: s.srv.nextRev()}
		return true, nil
	})
}

// ClearSwitchover implements dcs.Store.
func (s *Store) ClearSwitchover(ctx context.Context, ver string) error {
	return s.srv.do(ctx, s, "clearing switchover request", func(time.Time) (bool, error) {
		cur := s.srv.st.switchover
		if cur == nil {
			return false, fmt.Errorf("%w: no switchover request is pending", dcs.ErrNotFound)
		}
		if version(cur.rev) != ver {
			return false, fmt.Errorf("%w: switchover request version is %q, caller expected %q", dcs.ErrConflict, version(cur.rev), ver)
		}
		s.srv.st.switchover = nil
		s.srv.nextRev()
		return true, nil
	})
}

// SetInitialized implements dcs.Store.
func (s *Store) SetInitialized(ctx context.Context, in dcs.Initialized) error {
	const op = "recording cluster initialization"
	if in.At.IsZero() {
		in.At = s.clock.Now()
	}
	in.Version, in.Err = "", nil
	if err := record.ValidateInitialized(in); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if cur := s.srv.st.initialized; cur != nil {
			return false, fmt.Errorf("%w: cluster already initialized with id %q", dcs.ErrExists, cur.in.ClusterID)
		}
		s.srv.st.initialized = &initializedRec{in: in, rev: s.srv.nextRev()}
		return true, nil
	})
}

// AppendHistory implements dcs.Store.
func (s *Store) AppendHistory(ctx context.Context, e dcs.HistoryEntry) error {
	const op = "appending history"
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		var h []dcs.HistoryEntry
		if cur := s.srv.st.history; cur != nil {
			h = cur.h
		}
		s.srv.st.history = &historyRec{h: record.AppendHistory(h, e), rev: s.srv.nextRev()}
		return true, nil
	})
}
