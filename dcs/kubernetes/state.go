package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

const (
	// casAttempts bounds retries of a lost compare-and-set on the state
	// object (different records share it).
	casAttempts = 10
)

func hashVersion(v string) string {
	if v == "" {
		return ""
	}
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:8])
}

// readState fills c from the state Lease; s.mu is held.
func (s *Store) readState(c *dcs.Cluster, l *coordinationv1.Lease) {
	stored := func(key string) *record.Stored {
		raw, ok := l.Annotations[key]
		if !ok {
			return nil
		}
		return &record.Stored{Where: where(l) + " annotation " + key, Data: []byte(raw), Version: hashVersion(raw)}
	}
	st := record.StoredState{
		Config: stored(ConfigAnnotation), Switchover: stored(SwitchoverAnnotation), Reinit: stored(ReinitAnnotation), Restart: stored(RestartAnnotation), Initialized: stored(InitializedAnnotation),
	}
	if raw, ok := l.Annotations[HistoryAnnotation]; ok {
		// No version: the history is appended to, never compared.
		st.History = &record.Stored{Where: where(l) + " annotation " + HistoryAnnotation, Data: []byte(raw)}
	}
	record.DecodeState(c, st)
	s.lastConfig = c.Config
}

// updateState applies mutate to the state Lease's annotations and writes it
// with compare-and-set, retrying when another record of the shared object
// changed concurrently. mutate returns an error to abort (no retry).
func (s *Store) updateState(ctx context.Context, op string, mutate func(ann map[string]string) error) error {
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	base, _ := s.cached(s.stateName)
	for attempt := 0; attempt < casAttempts; attempt++ {
		l := s.newLease(s.stateName)
		if base != nil {
			l = base.DeepCopy()
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		if err := mutate(l.Annotations); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		_, err := s.write(ctx, l, base == nil)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
			if base, err = s.fetch(ctx, op, s.stateName); err != nil {
				return err
			}
			continue
		}
		return mapErr(op, err)
	}
	return fmt.Errorf("%s: %w: lost the compare-and-set on Lease %s/%s %d times", op, dcs.ErrConflict, s.ns, s.stateName, casAttempts)
}

// SetConfig implements dcs.Store.
func (s *Store) SetConfig(ctx context.Context, cfg dcs.Config, version string) error {
	const op = "setting cluster config"
	data, err := record.EncodeConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.updateState(ctx, op, func(ann map[string]string) error {
		return setConfig(ann, data, version)
	})
}

// setConfig sets the config annotation to data if it is still at version.
func setConfig(ann map[string]string, data []byte, version string) error {
	if cur := hashVersion(ann[ConfigAnnotation]); cur != version {
		return fmt.Errorf("%w: config version is %q, caller expected %q", dcs.ErrConflict, cur, version)
	}
	ann[ConfigAnnotation] = string(data)
	return nil
}

// ChangeConfig implements dcs.Store: the config and the history are
// annotations of one state Lease, written by one Update.
func (s *Store) ChangeConfig(ctx context.Context, cfg dcs.Config, version string, e dcs.HistoryEntry) error {
	const op = "changing cluster config"
	data, err := record.EncodeConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.updateState(ctx, op, func(ann map[string]string) error {
		if err := setConfig(ann, data, version); err != nil {
			return err
		}
		return s.appendHistory(ann, e)
	})
}

// RequestSwitchover implements dcs.Store.
func (s *Store) RequestSwitchover(ctx context.Context, sw dcs.Switchover) error {
	const op = "requesting switchover"
	_, data, err := record.PrepareSwitchover(sw, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, SwitchoverAnnotation, data, record.SwitchoverExists)
}

// createOnce adds annotation key with data to the state Lease only if it is
// absent (an Update on the Lease's resourceVersion); otherwise it returns
// exists of the stored value.
func (s *Store) createOnce(ctx context.Context, op, key string, data []byte, exists func(stored []byte) error) error {
	return s.updateState(ctx, op, func(ann map[string]string) error {
		if cur, ok := ann[key]; ok {
			return exists([]byte(cur))
		}
		ann[key] = string(data)
		return nil
	})
}

// ClearSwitchover implements dcs.Store.
func (s *Store) ClearSwitchover(ctx context.Context, version string) error {
	return s.clearRequest(ctx, "switchover", SwitchoverAnnotation, version)
}

// clearRequest deletes the pending request of kind, stored in annotation,
// if its version is still version.
func (s *Store) clearRequest(ctx context.Context, kind, annotation, version string) error {
	return s.updateState(ctx, "clearing "+kind+" request", func(ann map[string]string) error {
		cur, ok := ann[annotation]
		switch {
		case !ok:
			return fmt.Errorf("%w: no %s request is pending", dcs.ErrNotFound, kind)
		case hashVersion(cur) != version:
			return fmt.Errorf("%w: request version is %q, caller expected %q", dcs.ErrConflict, hashVersion(cur), version)
		}
		delete(ann, annotation)
		return nil
	})
}

// RequestReinit implements dcs.Store.
func (s *Store) RequestReinit(ctx context.Context, r dcs.Reinit) error {
	const op = "requesting reinit"
	_, data, err := record.PrepareReinit(r, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, ReinitAnnotation, data, record.ReinitExists)
}

// ClearReinit implements dcs.Store.
func (s *Store) ClearReinit(ctx context.Context, version string) error {
	return s.clearRequest(ctx, "reinit", ReinitAnnotation, version)
}

// RequestRestart implements dcs.Store.
func (s *Store) RequestRestart(ctx context.Context, r dcs.Restart) error {
	const op = "requesting restart"
	_, data, err := record.PrepareRestart(r, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, RestartAnnotation, data, record.RestartExists)
}

// ClearRestart implements dcs.Store.
func (s *Store) ClearRestart(ctx context.Context, version string) error {
	return s.clearRequest(ctx, "restart", RestartAnnotation, version)
}

// SetInitialized implements dcs.Store.
func (s *Store) SetInitialized(ctx context.Context, in dcs.Initialized) error {
	const op = "recording cluster initialization"
	_, data, err := record.PrepareInitialized(in, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.createOnce(ctx, op, InitializedAnnotation, data, record.InitializedExists)
}

// AppendHistory implements dcs.Store. A stored history that cannot be read
// is replaced (it was already reported in Cluster.Problems).
func (s *Store) AppendHistory(ctx context.Context, e dcs.HistoryEntry) error {
	const op = "appending history"
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.updateState(ctx, op, func(ann map[string]string) error { return s.appendHistory(ann, e) })
}

// appendHistory appends e to the history annotation in ann.
func (s *Store) appendHistory(ann map[string]string, e dcs.HistoryEntry) error {
	var h []dcs.HistoryEntry
	if raw, ok := ann[HistoryAnnotation]; ok {
		old, err := record.DecodeHistory(HistoryAnnotation, []byte(raw))
		if err != nil {
			s.log.Warn("replacing unreadable history", zap.Error(err))
		}
		h = old
	}
	data, err := record.EncodeHistory(record.AppendHistory(h, e))
	if err != nil {
		return err
	}
	ann[HistoryAnnotation] = string(data)
	return nil
}
