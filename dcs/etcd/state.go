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
	cmp := clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	if version != "" {
		rev, err := strconv.ParseInt(version, 10, 64)
		if err != nil {
			return false, nil, fmt.Errorf("%w: version %q is not an etcd revision", dcs.ErrConflict, version)
		}
		cmp = clientv3.Compare(clientv3.ModRevision(k), "=", rev)
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
	const op = "clearing switchover request"
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	if version == "" {
		return fmt.Errorf("%s: %w: empty version", op, dcs.ErrInvalid)
	}
	ok, cur, err := s.cas(ctx, s.key("switchover"), version, nil)
	if err != nil {
		return mapErr(op, err)
	}
	switch {
	case ok:
		return nil
	case cur == nil:
		return fmt.Errorf("%s: %w: no switchover request is pending", op, dcs.ErrNotFound)
	default:
		return fmt.Errorf("%s: %w: request version is %s, caller expected %q", op, dcs.ErrConflict, kvVer(cur), version)
	}
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
		var h []dcs.HistoryEntry
		version := ""
		if cur != nil {
			version = ver(cur)
			if old, err := record.DecodeHistory(k, cur.Value); err == nil {
				h = old
			} else {
				s.log.Warn("replacing unreadable history", zap.Error(err))
			}
		}
		data, err := record.EncodeHistory(record.AppendHistory(h, e))
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
