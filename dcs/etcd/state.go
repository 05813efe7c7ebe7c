package etcd

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// cas puts value at key k (deletes it when value is nil) if its mod revision
// is still version ("" for absent). It returns whether it succeeded and the
// current key otherwise.
func (s *Store) cas(ctx context.Context, k, version string, value []byte) (bool, *mvccpb.KeyValue, error) {
	cmp, err := atVersion(k, version)
	if err != nil {
		return false, nil, err
	}
	op := clientv3.OpPut(k, string(value))
	if value == nil {
		op = clientv3.OpDelete(k)
	}
	resp, err := s.cli.Txn(ctx).If(cmp).Then(op).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return false, nil, err
	}
	if resp.Succeeded {
		s.catchUp(ctx, resp.Header.Revision)
		return true, nil, nil
	}
	var cur *mvccpb.KeyValue
	if rr := resp.Responses[0].GetResponseRange(); len(rr.Kvs) > 0 {
		cur = rr.Kvs[0]
	}
	return false, cur, nil
}

// atVersion is the comparison "key k is at version" (its mod revision; ""
// for absent).
func atVersion(k, version string) (clientv3.Cmp, error) {
	if version == "" {
		return clientv3.Compare(clientv3.CreateRevision(k), "=", 0), nil
	}
	rev, err := strconv.ParseInt(version, 10, 64)
	if err != nil {
		return clientv3.Cmp{}, fmt.Errorf("%w: version %q is not an etcd revision", dcs.ErrConflict, version)
	}
	return clientv3.Compare(clientv3.ModRevision(k), "=", rev), nil
}

// SetConfig implements dcs.Store.
func (s *Store) SetConfig(ctx context.Context, cfg dcs.Config, version string) error {
	const op = "setting cluster config"
	data, err := record.EncodeConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	ok, cur, err := s.cas(ctx, s.key("config"), version, data)
	if err != nil {
		return mapErr(op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w: config version is %s, caller expected %q", op, dcs.ErrConflict, kvVer(cur), version)
	}
	return nil
}

func kvVer(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return `"" (absent)`
	}
	return strconv.Quote(ver(kv))
}

// RequestSwitchover implements dcs.Store.
func (s *Store) RequestSwitchover(ctx context.Context, sw dcs.Switchover) error {
	const op = "requesting switchover"
	_, data, err := record.PrepareSwitchover(sw, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, "switchover", data, record.SwitchoverExists)
}

// createOnce writes key only if it does not exist (a transaction on create
// revision 0); otherwise it returns exists of the stored value.
func (s *Store) createOnce(ctx context.Context, op, key string, data []byte, exists func(stored []byte) error) error {
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	ok, cur, err := s.cas(ctx, s.key(key), "", data)
	if err != nil {
		return mapErr(op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w", op, exists(bytes.TrimSpace(cur.Value)))
	}
	return nil
}

// ClearSwitchover implements dcs.Store.
func (s *Store) ClearSwitchover(ctx context.Context, version string) error {
	return s.clearRequest(ctx, "switchover", version)
}

// clearRequest deletes the pending request of kind ("switchover",
// "reinit", "restart") if its version is still version.
func (s *Store) clearRequest(ctx context.Context, kind, version string) error {
	op := "clearing " + kind + " request"
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	if version == "" {
		return fmt.Errorf("%s: %w: empty version", op, dcs.ErrInvalid)
	}
	ok, cur, err := s.cas(ctx, s.key(kind), version, nil)
	if err != nil {
		return mapErr(op, err)
	}
	switch {
	case ok:
		return nil
	case cur == nil:
		return fmt.Errorf("%s: %w: no %s request is pending", op, dcs.ErrNotFound, kind)
	default:
		return fmt.Errorf("%s: %w: request version is %s, caller expected %q", op, dcs.ErrConflict, kvVer(cur), version)
	}
}

// RequestReinit implements dcs.Store.
func (s *Store) RequestReinit(ctx context.Context, r dcs.Reinit) error {
	const op = "requesting reinit"
	_, data, err := record.PrepareReinit(r, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, "reinit", data, record.ReinitExists)
}

// ClearReinit implements dcs.Store.
func (s *Store) ClearReinit(ctx context.Context, version string) error {
	return s.clearRequest(ctx, "reinit", version)
}

// RequestRestart implements dcs.Store.
func (s *Store) RequestRestart(ctx context.Context, r dcs.Restart) error {
	const op = "requesting restart"
	_, data, err := record.PrepareRestart(r, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, "restart", data, record.RestartExists)
}

// ClearRestart implements dcs.Store.
func (s *Store) ClearRestart(ctx context.Context, version string) error {
	return s.clearRequest(ctx, "restart", version)
}

// SetInitialized implements dcs.Store.
func (s *Store) SetInitialized(ctx context.Context, in dcs.Initialized) error {
	const op = "recording cluster initialization"
	_, data, err := record.PrepareInitialized(in, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, "initialized", data, record.InitializedExists)
}

// AppendHistory implements dcs.Store. A stored history that cannot be read
// is replaced (it was already reported in Cluster.Problems).
func (s *Store) AppendHistory(ctx context.Context, e dcs.HistoryEntry) error {
	const op = "appending history"
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	k := s.key("history")
	cur, _ := s.cached("history")
	for attempt := 0; attempt < casAttempts; attempt++ {
		version, data, err := s.appended(cur, e)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		ok, now, err := s.cas(ctx, k, version, data)
		if err != nil {
			return mapErr(op, err)
		}
		if ok {
			return nil
		}
		cur = now
	}
	return fmt.Errorf("%s: %w: lost the compare-and-set %d times", op, dcs.ErrConflict, casAttempts)
}

// appended returns the version of the history key cur (nil when absent)
// and the encoding of its history with e appended.
func (s *Store) appended(cur *mvccpb.KeyValue, e dcs.HistoryEntry) (version string, data []byte, err error) {
	var h []dcs.HistoryEntry
	if cur != nil {
		version = ver(cur)
		if old, err := record.DecodeHistory(string(cur.Key), cur.Value); err == nil {
			h = old
		} else {
			s.log.Warn("replacing unreadable history", zap.Error(err))
		}
	}
	data, err = record.EncodeHistory(record.AppendHistory(h, e))
	return version, data, err
}

// ChangeConfig implements dcs.Store: one transaction guarded on both the
// config's and the history's mod revisions writes both; a lost race on the
// history alone is retried.
func (s *Store) ChangeConfig(ctx context.Context, cfg dcs.Config, version string, e dcs.HistoryEntry) error {
	const op = "changing cluster config"
	cfgData, err := record.EncodeConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	ck, hk := s.key("config"), s.key("history")
	cfgAt, err := atVersion(ck, version)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	hist, _ := s.cached("history")
	for attempt := 0; attempt < casAttempts; attempt++ {
		hversion, hdata, err := s.appended(hist, e)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		histAt, err := atVersion(hk, hversion)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		resp, err := s.cli.Txn(ctx).If(cfgAt, histAt).
			Then(clientv3.OpPut(ck, string(cfgData)), clientv3.OpPut(hk, string(hdata))).
			Else(clientv3.OpGet(ck), clientv3.OpGet(hk)).Commit()
		if err != nil {
			return mapErr(op, err)
		}
		if resp.Succeeded {
			s.catchUp(ctx, resp.Header.Revision)
			return nil
		}
		cfgNow, histNow := firstKV(resp, 0), firstKV(resp, 1)
		if got := kvVersion(cfgNow); got != version {
			return fmt.Errorf("%s: %w: config version is %s, caller expected %q", op, dcs.ErrConflict, kvVer(cfgNow), version)
		}
		hist = histNow
	}
	return fmt.Errorf("%s: %w: lost the compare-and-set on the history %d times", op, dcs.ErrConflict, casAttempts)
}

// firstKV is the key read by the i-th operation of a transaction's
// response; nil when absent.
func firstKV(resp *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if rr := resp.Responses[i].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
		return rr.Kvs[0]
	}
	return nil
}

// kvVersion is kv's version as callers pass it back: "" when absent.
func kvVersion(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return ""
	}
	return ver(kv)
}
