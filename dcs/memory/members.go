package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

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

// DeleteMember implements dcs.Store: the member is live while, in this
// store's view, it holds the lock or its record is not stale.
func (s *Store) DeleteMember(ctx context.Context, name string) error {
	op := "deleting the record of member " + name
	if err := dcs.ValidateName("member", name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	rev, err := s.judgeGone(name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		switch cur := s.srv.st.members[name]; {
		case cur == nil:
			return false, fmt.Errorf("%w: member %s has no record", dcs.ErrNotFound, name)
		case cur.rev != rev:
			return false, fmt.Errorf("%w: the record of %s changed after it was judged gone", dcs.ErrConflict, name)
		}
		delete(s.srv.st.members, name)
		s.srv.nextRev()
		return true, nil
	})
}

// judgeGone returns the revision of name's record when this store's view
// shows the member not live.
func (s *Store) judgeGone(name string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return 0, fmt.Errorf("%w: member %s has been partitioned since it started", dcs.ErrUnreachable, s.name)
	}
	now := s.clock.Now()
	rec := s.view.members[name]
	if rec == nil {
		return 0, fmt.Errorf("%w: member %s has no record", dcs.ErrNotFound, name)
	}
	if l := s.view.leader; l != nil && l.holder == name && !record.Expired(s.obs["leader"].at, l.ttl, now) {
		return 0, record.LockHolderLive(name)
	}
	if err := record.RecordLive(name, s.obs["members/"+name].at, rec.ttl, now); err != nil {
		return 0, err
	}
	return rec.rev, nil
}
