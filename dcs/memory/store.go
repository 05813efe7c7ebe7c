package memory

import (
	"context"
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
	o, err := record.StoreOptions{
		Member: opts.Member, Instance: opts.Instance, Clock: opts.Clock, Logger: opts.Logger,
		MemberTTL: opts.MemberTTL, MemberRefresh: opts.MemberRefresh,
	}.WithDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{
		srv: srv, name: o.Member, instance: o.Instance, clock: o.Clock,
		// The caller's logger names the cluster and member once.
		log:       o.Logger.Named("dcs-memory").With(zap.String("instance", o.Instance)),
		memberTTL: o.MemberTTL, memberRefresh: o.MemberRefresh,
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
			ObservedAt: at, Expired: record.Expired(at, l.ttl, now),
		}
	}
	for n, r := range v.members {
		m := r.m
		m.Version = version(r.rev)
		m.ObservedAt = s.obs["members/"+n].at
		m.Stale = record.Expired(m.ObservedAt, r.ttl, now)
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
	if v.reinit != nil {
		r := v.reinit.r
		r.Version = version(v.reinit.rev)
		c.Reinit = &r
	}
	if v.restart != nil {
		r := v.restart.r
		r.Version = version(v.restart.rev)
		c.Restart = &r
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
