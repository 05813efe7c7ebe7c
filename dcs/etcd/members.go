package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

// DeleteMember implements dcs.Store. etcd alone judges a member's record:
// it is live while the session lease it is bound to exists. The delete is
// a transaction on the mod revision judged.
func (s *Store) DeleteMember(ctx context.Context, name string) error {
	op := "deleting the record of member " + name
	if err := dcs.ValidateName("member", name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	kv, _ := s.cached("members/" + name)
	if kv == nil {
		return fmt.Errorf("%s: %w: member %s has no record", op, dcs.ErrNotFound, name)
	}
	if s.holdsLock(name) {
		return fmt.Errorf("%s: %w", op, record.LockHolderLive(name))
	}
	if err := s.sessionLive(ctx, op, name, kv); err != nil {
		return err
	}
	k := string(kv.Key)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(k)).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return mapErr(op, err)
	}
	if !resp.Succeeded {
		if firstKV(resp, 0) == nil {
			return fmt.Errorf("%s: %w: the record vanished (its session lease expired)", op, dcs.ErrNotFound)
		}
		return fmt.Errorf("%s: %w: the record of %s changed after it was judged gone", op, dcs.ErrConflict, name)
	}
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}

// holdsLock reports whether the cached leader key names member as its
// holder and has not expired.
func (s *Store) holdsLock(member string) bool {
	kv, observed := s.cached("leader")
	if kv == nil {
		return false
	}
	s.mu.Lock()
	cfgTTL := s.lastConfig.TTL
	s.mu.Unlock()
	l := s.leaderOf(kv, observed, cfgTTL, s.clock.Now())
	return l.Holder == member && !l.Expired
}

// sessionLive returns ErrLive while the lease that kv is bound to exists.
func (s *Store) sessionLive(ctx context.Context, op, member string, kv *mvccpb.KeyValue) error {
	if kv.Lease == 0 {
		return nil // bound to no session: nothing will ever remove it
	}
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
		return nil
	}
	if err != nil {
		return mapErr(op, err)
	}
	if resp.TTL <= 0 {
		return nil // expired; etcd deletes the record with it
	}
	return fmt.Errorf("%s: %w: %s's record is bound to its agent's session lease %x, which etcd keeps for another %ds; "+
		"the record vanishes with it: at once when its agent stops cleanly, within the member ttl after a crash",
		op, dcs.ErrLive, member, kv.Lease, resp.TTL)
}
