package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// entry is a cached Lease and when this store saw it change.
type entry struct {
	lease    *coordinationv1.Lease
	observed time.Time
}

func (s *Store) start(selector string) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return s.leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return s.leases.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &coordinationv1.Lease{}, cache.SharedIndexInformerOptions{})
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		err = mapErr("listing and watching leases", err)
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		s.log.Info("lease watch failed", zap.Error(err))
	}); err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj, false) },
		UpdateFunc: func(_, obj any) { s.observe(obj, false) },
		DeleteFunc: func(obj any) { s.observe(obj, true) },
	})
	if err != nil {
		return err
	}
	s.synced = reg.HasSyncedChecker().Done()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		inf.RunWithContext(ctx)
	}()
	return nil
}

// observe applies an informer event, or the result of an own write, to the
// cache. Versions older than the cached one are ignored: the informer may
// deliver an event after this store applied its own later write.
func (s *Store) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	s.mu.Lock()
	cur, have := s.objs[l.Name]
	newer := !have || isNewer(l.ResourceVersion, cur.lease.ResourceVersion)
	switch {
	case deleted && have && !isNewer(cur.lease.ResourceVersion, l.ResourceVersion):
		delete(s.objs, l.Name)
	case !deleted && newer:
		s.objs[l.Name] = entry{lease: l, observed: s.clock.Now()}
	default:
		s.mu.Unlock()
		return
	}
	s.lastErr = nil
	s.mu.Unlock()
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// isNewer reports whether resourceVersion a is newer than b. Unparsable
// versions count as newer, so that a change is never ignored.
func isNewer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil && a != b || c > 0
}

// waitSynced waits for the informer's first list.
func (s *Store) waitSynced(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return mapErr(op, err)
	}
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return mapErr(op, ctx.Err())
	}
	s.mu.Lock()
	last := s.lastErr
	s.mu.Unlock()
	if errors.Is(last, dcs.ErrForbidden) {
		return fmt.Errorf("%s: %w", op, last)
	}
	return fmt.Errorf("%s: %w: leases in namespace %s not listed yet (%s)", op, dcs.ErrUnreachable, s.ns, dcs.LastOrSilence(last))
}

// cached returns the cached Lease name and when it was observed to change.
func (s *Store) cached(name string) (*coordinationv1.Lease, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.objs[name]
	return e.lease, e.observed
}

// Cluster implements dcs.Store.
func (s *Store) Cluster(ctx context.Context) (*dcs.Cluster, error) {
	const op = "reading cluster"
	if err := s.waitSynced(ctx, op); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	c := &dcs.Cluster{Name: s.cluster, Config: s.lastConfig, ReadAt: now}
	if e, ok := s.objs[s.stateName]; ok {
		s.readState(c, e.lease)
	}
	if e, ok := s.objs[s.leaderName]; ok {
		c.Leader = leaderOf(e.lease, e.observed, c.Config.TTL, now)
		if c.Leader != nil && c.Leader.Err != nil {
			c.Problems = append(c.Problems, c.Leader.Err)
		}
	}
	for name, e := range s.objs {
		member, ok := strings.CutPrefix(name, s.mpref)
		if !ok {
			continue
		}
		m, err := s.parseMember(e.lease, member)
		if err != nil {
			c.Problems = append(c.Problems, err)
			continue
		}
		m.Version, m.ObservedAt = e.lease.ResourceVersion, e.observed
		ttl, _ := leaseTTL(e.lease) // validated by parseMember
		m.Stale = record.Expired(e.observed, ttl, now)
		c.Members = append(c.Members, m)
	}
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].Name < c.Members[j].Name })
	return c, nil
}
