package etcd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

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
	return fmt.Errorf("%s: %w: no successful read of %s yet from %s (%s)", op, dcs.ErrUnreachable, s.prefix,
		strings.Join(s.cli.Endpoints(), ","), dcs.LastOrSilence(last))
}

// cached returns the cached key and when it was observed to change.
func (s *Store) cached(k string) (*mvccpb.KeyValue, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kvs[s.key(k)], s.observed[s.key(k)]
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
	record.DecodeState(c, record.StoredState{
		Config: s.storedLocked("config"), Switchover: s.storedLocked("switchover"),
		Reinit: s.storedLocked("reinit"), Restart: s.storedLocked("restart"),
		Initialized: s.storedLocked("initialized"), History: s.storedLocked("history"),
	})
	s.lastConfig = c.Config
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
	return c, nil
}

// storedLocked returns the cached cluster-state key k for
// record.DecodeState, nil when it is absent; s.mu is held.
func (s *Store) storedLocked(k string) *record.Stored {
	kv := s.kvs[s.key(k)]
	if kv == nil {
		return nil
	}
	return &record.Stored{Where: string(kv.Key), Data: kv.Value, Version: ver(kv)}
}
