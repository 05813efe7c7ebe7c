package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// ours reports whether the lock record l names this store's member and
// instance.
func (s *Store) ours(l *leaderRec) bool { return l.holder == s.name && l.instance == s.instance }

// holderOf names l's holder for this store's errors.
func (s *Store) holderOf(l *leaderRec) string {
	return record.HolderDescription(s.name, s.instance, l.holder, l.instance)
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
			if !record.Expired(o.at, l.ttl, now) {
				return fmt.Errorf("%s: %w: held by %s, unchanged for %v of its %v ttl", op, dcs.ErrHeld, s.holderOf(l), now.Sub(o.at), l.ttl)
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

// TakeOverLeader implements dcs.Store.
func (s *Store) TakeOverLeader(ctx context.Context, ver string, ttl time.Duration) error {
	const op = "taking over the leader lock"
	if err := dcs.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(now time.Time) (bool, error) {
		cur := s.srv.st.leader
		if cur == nil || version(cur.rev) != ver {
			return false, fmt.Errorf("%w: the lock is not at version %s any more", dcs.ErrConflict, ver)
		}
		s.srv.st.leader = &leaderRec{holder: s.name, instance: s.instance, ttl: ttl, acquiredAt: now, renewedAt: now,
			rev: s.srv.nextRev(), transitions: cur.transitions + 1}
		return true, nil
	})
}
