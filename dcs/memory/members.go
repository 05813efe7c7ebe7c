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
