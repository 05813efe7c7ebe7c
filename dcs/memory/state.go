package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// SetConfig implements dcs.Store.
func (s *Store) SetConfig(ctx context.Context, cfg dcs.Config, ver string) error {
	const op = "setting cluster config"
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if err := s.srv.configAt(ver); err != nil {
			return false, err
		}
		s.srv.st.config = &configRec{cfg: cfg, rev: s.srv.nextRev()}
		return true, nil
	})
}

// configAt checks that the stored config is at version ver ("" for none);
// the caller holds srv.mu.
func (srv *Server) configAt(ver string) error {
	cur := ""
	if c := srv.st.config; c != nil {
		cur = version(c.rev)
	}
	if cur != ver {
		return fmt.Errorf("%w: config version is %q, caller expected %q", dcs.ErrConflict, cur, ver)
	}
	return nil
}

// ChangeConfig implements dcs.Store: config and history change under one
// lock of the server.
func (s *Store) ChangeConfig(ctx context.Context, cfg dcs.Config, ver string, e dcs.HistoryEntry) error {
	const op = "changing cluster config"
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if err := s.srv.configAt(ver); err != nil {
			return false, err
		}
		s.srv.st.config = &configRec{cfg: cfg, rev: s.srv.nextRev()}
		s.srv.appendHistory(e)
		return true, nil
	})
}

// RequestSwitchover implements dcs.Store.
func (s *Store) RequestSwitchover(ctx context.Context, sw dcs.Switchover) error {
	const op = "requesting switchover"
	sw, data, err := record.PrepareSwitchover(sw, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if cur := s.srv.st.switchover; cur != nil {
			return false, record.SwitchoverExists(cur.data)
		}
		s.srv.st.switchover = &switchoverRec{sw: sw, data: data, rev: s.srv.nextRev()}
		return true, nil
	})
}

// ClearSwitchover implements dcs.Store.
func (s *Store) ClearSwitchover(ctx context.Context, ver string) error {
	return s.srv.do(ctx, s, "clearing switchover request", func(time.Time) (bool, error) {
		cur := s.srv.st.switchover
		if cur == nil {
			return false, fmt.Errorf("%w: no switchover request is pending", dcs.ErrNotFound)
		}
		if version(cur.rev) != ver {
			return false, fmt.Errorf("%w: switchover request version is %q, caller expected %q", dcs.ErrConflict, version(cur.rev), ver)
		}
		s.srv.st.switchover = nil
		s.srv.nextRev()
		return true, nil
	})
}

// RequestReinit implements dcs.Store.
func (s *Store) RequestReinit(ctx context.Context, r dcs.Reinit) error {
	const op = "requesting reinit"
	r, data, err := record.PrepareReinit(r, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if cur := s.srv.st.reinit; cur != nil {
			return false, record.ReinitExists(cur.data)
		}
		s.srv.st.reinit = &reinitRec{r: r, data: data, rev: s.srv.nextRev()}
		return true, nil
	})
}

// ClearReinit implements dcs.Store.
func (s *Store) ClearReinit(ctx context.Context, ver string) error {
	return s.srv.do(ctx, s, "clearing reinit request", func(time.Time) (bool, error) {
		cur := s.srv.st.reinit
		if cur == nil {
			return false, fmt.Errorf("%w: no reinit request is pending", dcs.ErrNotFound)
		}
		if version(cur.rev) != ver {
			return false, fmt.Errorf("%w: reinit request version is %q, caller expected %q", dcs.ErrConflict, version(cur.rev), ver)
		}
		s.srv.st.reinit = nil
		s.srv.nextRev()
		return true, nil
	})
}

// RequestRestart implements dcs.Store.
func (s *Store) RequestRestart(ctx context.Context, r dcs.Restart) error {
	const op = "requesting restart"
	r, data, err := record.PrepareRestart(r, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if cur := s.srv.st.restart; cur != nil {
			return false, record.RestartExists(cur.data)
		}
		s.srv.st.restart = &restartRec{r: r, data: data, rev: s.srv.nextRev()}
		return true, nil
	})
}

// ClearRestart implements dcs.Store.
func (s *Store) ClearRestart(ctx context.Context, ver string) error {
	return s.srv.do(ctx, s, "clearing restart request", func(time.Time) (bool, error) {
		cur := s.srv.st.restart
		if cur == nil {
			return false, fmt.Errorf("%w: no restart request is pending", dcs.ErrNotFound)
		}
		if version(cur.rev) != ver {
			return false, fmt.Errorf("%w: restart request version is %q, caller expected %q", dcs.ErrConflict, version(cur.rev), ver)
		}
		s.srv.st.restart = nil
		s.srv.nextRev()
		return true, nil
	})
}

// SetInitialized implements dcs.Store.
func (s *Store) SetInitialized(ctx context.Context, in dcs.Initialized) error {
	const op = "recording cluster initialization"
	in, data, err := record.PrepareInitialized(in, s.clock.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		if cur := s.srv.st.initialized; cur != nil {
			return false, record.InitializedExists(cur.data)
		}
		s.srv.st.initialized = &initializedRec{in: in, data: data, rev: s.srv.nextRev()}
		return true, nil
	})
}

// AppendHistory implements dcs.Store.
func (s *Store) AppendHistory(ctx context.Context, e dcs.HistoryEntry) error {
	const op = "appending history"
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.srv.do(ctx, s, op, func(time.Time) (bool, error) {
		s.srv.appendHistory(e)
		return true, nil
	})
}

// appendHistory appends e to the stored history; the caller holds srv.mu.
func (srv *Server) appendHistory(e dcs.HistoryEntry) {
	var h []dcs.HistoryEntry
	if cur := srv.st.history; cur != nil {
		h = cur.h
	}
	srv.st.history = &historyRec{h: record.AppendHistory(h, e), rev: srv.nextRev()}
}
