package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

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
		l.Expired = record.Expired(observed, l.TTL, now)
	}
	return l
}

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

// TakeOverLeader implements dcs.Store: the key is put, with a lease of our
// own, only if it is still at the revision seen. A lease keep-alive does
// not change the key, so a live holder's lock can be taken too: the caller
// must have judged it dead.
func (s *Store) TakeOverLeader(ctx context.Context, version string, ttl time.Duration) error {
	const op = "taking over the leader lock"
	if err := dcs.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	kv, _ := s.cached("leader")
	if kv == nil || ver(kv) != version {
		return fmt.Errorf("%s: %w: the lock is not at version %s any more", op, dcs.ErrConflict, version)
	}
	grant, err := s.cli.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return mapErr(op, err)
	}
	k := s.key("leader")
	value := s.leaderValue(s.name, s.instance, ttl, s.clock.Now())
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
		Then(clientv3.OpPut(k, string(value), clientv3.WithLease(grant.ID))).Commit()
	if err != nil {
		return mapErr(op, err)
	}
	if !resp.Succeeded {
		s.revoke(grant.ID)
		return fmt.Errorf("%s: %w: the lock changed since revision %s", op, dcs.ErrConflict, version)
	}
	s.held = &hold{lease: grant.ID, createRev: kv.CreateRevision, value: value, ttl: ttl}
	s.catchUp(ctx, resp.Header.Revision)
	return nil
}
