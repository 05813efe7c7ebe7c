package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

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
