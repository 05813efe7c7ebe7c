package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// leaderRecord is a parsed leader Lease.
type leaderRecord struct {
	holder      string // "" when released
	instance    string // "" when the Lease does not name the holder's instance
	ttl         time.Duration
	acquired    time.Time
	renewed     time.Time
	transitions int64
}

func parseLeader(l *coordinationv1.Lease) (leaderRecord, error) {
	var r leaderRecord
	var errs []error
	ttl, err := leaseTTL(l)
	if err != nil {
		errs = append(errs, err)
	}
	r.ttl = ttl
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
		if err := dcs.ValidateName("holder", h); err != nil {
			errs = append(errs, err)
		}
		r.holder = h
		inst, err := holderInstance(l, h)
		if err != nil {
			errs = append(errs, err)
		}
		r.instance = inst
	}
	if l.Spec.LeaseTransitions != nil {
		if *l.Spec.LeaseTransitions < 0 {
			errs = append(errs, fmt.Errorf("negative leaseTransitions %d", *l.Spec.LeaseTransitions))
		}
		r.transitions = int64(*l.Spec.LeaseTransitions)
	}
	if l.Spec.AcquireTime != nil {
		r.acquired = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		r.renewed = l.Spec.RenewTime.Time
	}
	if len(errs) > 0 {
		return r, record.Corrupt(where(l), "invalid leader lock", errors.Join(errs...))
	}
	return r, nil
}

// holderInstance reads the instance of holder from l's
// HolderInstanceAnnotation: "" when it is absent or was written for another
// holder (holderIdentity was changed by someone who did not rewrite it).
func holderInstance(l *coordinationv1.Lease, holder string) (string, error) {
	raw, ok := l.Annotations[HolderInstanceAnnotation]
	if !ok {
		return "", nil
	}
	h, inst, ok := strings.Cut(raw, "/")
	if !ok {
		return "", fmt.Errorf("annotation %s %s is not <holder>/<instance>", HolderInstanceAnnotation, dcs.QuoteCut(raw))
	}
	if h != holder {
		return "", nil
	}
	if err := dcs.ValidateInstance(inst); err != nil {
		return "", fmt.Errorf("annotation %s: %w", HolderInstanceAnnotation, err)
	}
	return inst, nil
}

// setHolder makes (holder, instance) the holder of l, or nobody when holder
// is "", in one object: holderIdentity and HolderInstanceAnnotation.
func setHolder(l *coordinationv1.Lease, holder, instance string) {
	if holder == "" {
		l.Spec.HolderIdentity = nil
		delete(l.Annotations, HolderInstanceAnnotation)
		return
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[HolderInstanceAnnotation] = holder + "/" + instance
}

// ours reports whether the parsed lock r names this store's member and
// instance.
func (s *Store) ours(r leaderRecord) bool { return r.holder == s.name && r.instance == s.instance }

// leaderOf judges the leader Lease at now; nil when nobody holds it.
func leaderOf(l *coordinationv1.Lease, observed time.Time, cfgTTL time.Duration, now time.Time) *dcs.Leader {
	r, err := parseLeader(l)
	if err == nil && r.holder == "" {
		return nil
	}
	ld := &dcs.Leader{
		Holder: r.holder, Instance: r.instance, Version: l.ResourceVersion, TTL: r.ttl,
		AcquiredAt: r.acquired, RenewedAt: r.renewed, Transitions: r.transitions,
		ObservedAt: observed,
	}
	if err != nil {
		ld.Holder, ld.Instance, ld.TTL, ld.Err = dcs.UnknownHolder, "", cfgTTL, err
	}
	ld.Expired = record.Expired(observed, ld.TTL, now)
	return ld
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
	cur, observed := s.cached(s.leaderName)
	if cur == nil {
		l := s.newLease(s.leaderName)
		l.Spec = coordinationv1.LeaseSpec{
			LeaseDurationSeconds: s.ttlOf(ttl), AcquireTime: s.now(), RenewTime: s.now(), LeaseTransitions: ptr.To[int32](0),
		}
		setHolder(l, s.name, s.instance)
		res, err := s.write(ctx, l, true)
		if apierrors.IsAlreadyExists(err) {
			if _, ferr := s.fetch(ctx, op, s.leaderName); ferr != nil {
				return ferr
			}
			return fmt.Errorf("%s: %w: the leader Lease was created concurrently", op, dcs.ErrConflict)
		}
		if err != nil {
			return mapErr(op, err)
		}
		s.held = res
		return nil
	}
	s.mu.Lock()
	cfgTTL := s.lastConfig.TTL
	s.mu.Unlock()
	now := s.clock.Now()
	r, perr := parseLeader(cur)
	mine := perr == nil && s.ours(r)
	if ld := leaderOf(cur, observed, cfgTTL, now); ld != nil && !mine && !ld.Expired {
		return fmt.Errorf("%s: %w: held by %s, unchanged for %v of its %v ttl%s",
			op, dcs.ErrHeld, record.HolderDescription(s.name, s.instance, ld.Holder, ld.Instance),
			now.Sub(observed).Round(time.Millisecond), ld.TTL, errSuffix(ld.Err))
	}
	l := cur.DeepCopy()
	setHolder(l, s.name, s.instance)
	l.Spec.LeaseDurationSeconds = s.ttlOf(ttl)
	l.Spec.RenewTime = s.now()
	if !mine {
		l.Spec.AcquireTime = l.Spec.RenewTime
		l.Spec.LeaseTransitions = ptr.To(int32(r.transitions + 1))
	}
	res, err := s.write(ctx, l, false)
	if apierrors.IsConflict(err) {
		// The Lease changed since the cache last saw it: the watch lags
		// (seen under packet delay, for tens of seconds). Read it, so that
		// the next decision sees the real holder instead of retrying the
		// same stale takeover.
		if _, ferr := s.fetch(ctx, op, s.leaderName); ferr != nil {
			return ferr
		}
		return fmt.Errorf("%s: %w: the leader Lease changed since this member last saw it", op, dcs.ErrConflict)
	}
	if err != nil {
		return mapErr(op, err)
	}
	if perr != nil {
		s.log.Warn("took over an unreadable leader lock", zap.Error(perr))
	}
	s.held = res
	return nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (%v)", err)
}

// casLeader applies mutate to the leader Lease this member and instance
// hold and writes it on the resourceVersion of its last write. When that
// version is stale (the cache lags a hand-over to us, or someone touched the
// object) it re-reads the Lease and retries once if this member and instance
// still hold it; otherwise ErrNotLeader. On success held is the result, or
// nil when mutate gave the lock away.
func (s *Store) casLeader(ctx context.Context, op string, mutate func(*coordinationv1.Lease)) error {
	base := s.held
	if base == nil {
		if l, _ := s.cached(s.leaderName); l != nil {
			if r, err := parseLeader(l); err == nil && s.ours(r) {
				base = l
			}
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		if base == nil {
			l, err := s.fetch(ctx, op, s.leaderName)
			if err != nil {
				return err
			}
			holder := "nobody"
			if l != nil {
				r, err := parseLeader(l)
				switch {
				case err != nil:
					holder = dcs.UnknownHolder + errSuffix(err)
				case s.ours(r):
					base = l
				case r.holder != "":
					holder = record.HolderDescription(s.name, s.instance, r.holder, r.instance)
				}
			}
			if base == nil {
				s.held = nil
				return fmt.Errorf("%s: %w: held by %s", op, dcs.ErrNotLeader, holder)
			}
		}
		l := base.DeepCopy()
		mutate(l)
		res, err := s.write(ctx, l, false)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			base = nil
			continue
		}
		if err != nil {
			return mapErr(op, err)
		}
		if r, err := parseLeader(res); err == nil && s.ours(r) {
			s.held = res
		} else {
			s.held = nil
		}
		return nil
	}
	s.held = nil
	return fmt.Errorf("%s: %w: the leader Lease keeps changing under us", op, dcs.ErrNotLeader)
}

// RenewLeader implements dcs.Store: one Update of the leader Lease on the
// resourceVersion of this member's last write.
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
	return s.casLeader(ctx, op, func(l *coordinationv1.Lease) {
		l.Spec.LeaseDurationSeconds = s.ttlOf(ttl)
		l.Spec.RenewTime = s.now()
	})
}

// ReleaseLeader implements dcs.Store: clears holderIdentity.
func (s *Store) ReleaseLeader(ctx context.Context) error {
	const op = "releasing leader lock"
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	return s.casLeader(ctx, op, func(l *coordinationv1.Lease) {
		setHolder(l, "", "")
		l.Spec.RenewTime = s.now()
	})
}

// HandoverLeader implements dcs.Store: sets holderIdentity to `to` and the
// holder instance to toInstance in one Update.
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
	return s.casLeader(ctx, op, func(l *coordinationv1.Lease) {
		setHolder(l, to, toInstance)
		l.Spec.AcquireTime = s.now()
		l.Spec.RenewTime = l.Spec.AcquireTime
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	})
}

// TakeOverLeader implements dcs.Store: an update of the Lease at the
// resourceVersion seen, which every renewal changes.
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
	cur, _ := s.cached(s.leaderName)
	if cur == nil || cur.ResourceVersion != version {
		return fmt.Errorf("%s: %w: the lock is not at version %s any more", op, dcs.ErrConflict, version)
	}
	var transitions int64
	if r, err := parseLeader(cur); err == nil {
		transitions = r.transitions
	}
	l := cur.DeepCopy()
	setHolder(l, s.name, s.instance)
	l.Spec.LeaseDurationSeconds = s.ttlOf(ttl)
	l.Spec.RenewTime = s.now()
	l.Spec.AcquireTime = l.Spec.RenewTime
	l.Spec.LeaseTransitions = ptr.To(int32(transitions + 1))
	res, err := s.write(ctx, l, false)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w: the leader Lease changed since version %s", op, dcs.ErrConflict, version)
	}
	if err != nil {
		return mapErr(op, err)
	}
	s.held = res
	return nil
}
