package kubernetes

import (
	"context"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

func (s *Store) parseMember(l *coordinationv1.Lease, member string) (dcs.Member, error) {
	var errs []error
	if _, err := leaseTTL(l); err != nil {
		errs = append(errs, err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != member {
		errs = append(errs, fmt.Errorf("holderIdentity %s does not match the member name %q", dcs.QuoteCut(h), member))
	}
	if len(errs) > 0 {
		return dcs.Member{}, record.Corrupt(where(l), "invalid member Lease", errors.Join(errs...))
	}
	raw, ok := l.Annotations[MemberAnnotation]
	if !ok {
		return dcs.Member{}, record.Corrupt(where(l), "annotation "+MemberAnnotation+" is missing", nil)
	}
	return record.DecodeMember(where(l)+" annotation "+MemberAnnotation, member, []byte(raw))
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
	name := s.mpref + s.name
	base, _ := s.cached(name)
	s.mu.Lock()
	need := base == nil || record.MemberNeedsWrite(s.lastMember, s.lastAt, m, now, s.memberRefresh)
	s.mu.Unlock()
	if !need {
		return nil
	}
	for attempt := 0; ; attempt++ {
		l := s.newLease(name)
		if base != nil {
			l = base.DeepCopy()
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[MemberAnnotation] = string(data)
		l.Spec.HolderIdentity = ptr.To(s.name)
		l.Spec.LeaseDurationSeconds = s.ttlOf(s.memberTTL)
		l.Spec.RenewTime = s.now()
		_, err := s.write(ctx, l, base == nil)
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) && attempt == 0 {
			// Someone else touched our object: re-read and write once more.
			if base, err = s.fetch(ctx, op, name); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return mapErr(op, err)
		}
		s.mu.Lock()
		s.lastMember, s.lastAt = &m, now
		s.mu.Unlock()
		return nil
	}
}

// DeleteMember implements dcs.Store: the member is live while it holds the
// leader Lease or its member Lease is not stale as this store observed it;
// the delete carries the resourceVersion judged as its precondition.
func (s *Store) DeleteMember(ctx context.Context, name string) error {
	op := "deleting the record of member " + name
	if err := dcs.ValidateName("member", name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.waitSynced(ctx, op); err != nil {
		return err
	}
	l, err := s.judgeGone(name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	rv := l.ResourceVersion
	err = s.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: %w: %v; deleting a member Lease needs the delete verb on leases in namespace %s, "+
			"which the agents' Role does not grant: run agentctl remove with credentials that have it", op, dcs.ErrForbidden, err, s.ns)
	}
	if err != nil {
		return mapErr(op, err)
	}
	s.observe(l, true)
	return nil
}

// judgeGone returns name's member Lease when this store's cache shows the
// member not live.
func (s *Store) judgeGone(name string) (*coordinationv1.Lease, error) {
	l, observed := s.cached(s.mpref + name)
	if l == nil {
		return nil, fmt.Errorf("%w: member %s has no Lease %s%s", dcs.ErrNotFound, name, s.mpref, name)
	}
	now := s.clock.Now()
	if lead, leadObserved := s.cached(s.leaderName); lead != nil {
		s.mu.Lock()
		cfgTTL := s.lastConfig.TTL
		s.mu.Unlock()
		if ld := leaderOf(lead, leadObserved, cfgTTL, now); ld != nil && ld.Holder == name && !ld.Expired {
			return nil, record.LockHolderLive(name)
		}
	}
	ttl, err := leaseTTL(l)
	if err != nil {
		ttl = s.memberTTL // an unreadable Lease is judged by this store's own member ttl
	}
	if err := record.RecordLive(name, observed, ttl, now); err != nil {
		return nil, err
	}
	return l, nil
}
