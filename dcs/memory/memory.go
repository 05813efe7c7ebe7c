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
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
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
	sw   dcs.Switchover
	data []byte // sw's encoding, for the refusal of a second request
	rev  int64
}

type reinitRec struct {
	r    dcs.Reinit
	data []byte // r's encoding, for the refusal of a second request
	rev  int64
}

type restartRec struct {
	r    dcs.Restart
	data []byte // r's encoding, for the refusal of a second request
	rev  int64
}

type initializedRec struct {
	in   dcs.Initialized
	data []byte // in's encoding, for the refusal of a second record
	rev  int64
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
	reinit      *reinitRec
	restart     *restartRec
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
	if st.reinit != nil {
		r["reinit"] = st.reinit.rev
	}
	if st.restart != nil {
		r["restart"] = st.restart.rev
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
