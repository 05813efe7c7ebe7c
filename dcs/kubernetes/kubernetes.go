// Package kubernetes is the Kubernetes backend of the dcs contract. It uses
// coordination.k8s.io/v1 Leases only, in one namespace.
//
// # Layout
//
// Every object carries the labels app.kubernetes.io/managed-by=mysqlha and
// mysqlha.io/cluster=<cluster> (keys configurable):
//
//	Lease <cluster>-leader           the lock: holderIdentity (the holder's member
//	                                 name), leaseDurationSeconds (its declared
//	                                 ttl), acquireTime, renewTime,
//	                                 leaseTransitions, and annotation
//	                                 mysqlha.io/holder-instance =
//	                                 "<holder>/<agent instance id>";
//	                                 holderIdentity unset when released
//	Lease <cluster>-member-<member>  one per member, written only by it:
//	                                 holderIdentity = member, leaseDurationSeconds
//	                                 = member ttl, renewTime = last write, the
//	                                 record as JSON in annotation mysqlha.io/member
//	Lease <cluster>-state            annotations mysqlha.io/config,
//	                                 mysqlha.io/switchover, mysqlha.io/initialized,
//	                                 mysqlha.io/history (JSON each)
//
// Why Leases for the state too, rather than a ConfigMap: the agent then needs
// exactly one resource in its Role (leases: get, list, watch, create, update;
// no delete, no patch), which is DESIGN.md's RBAC sheet, and one watch covers
// every object of the cluster. The state records share one object, so each
// record's version is a hash of its annotation: compare-and-set is by content
// (an update of the history does not invalidate a pending switchover's
// version), made atomic by the object's resourceVersion.
//
// # Guarantees
//
// Every write is an Update carrying a resourceVersion (optimistic
// concurrency) or a Create. The lock may be taken by another member only
// after the leader Lease has not changed (same resourceVersion) for its
// leaseDurationSeconds as measured on this store's injected clock from when
// its informer delivered that version — the client-go rule; clocks of
// different machines are never compared. A takeover is an Update on exactly
// the resourceVersion that was observed, so a change this store has not
// seen makes it fail.
//
// The lock belongs to an agent process, not to a name: holderIdentity stays
// the member name (kubectl, operators and client-go read it), and the
// holder's instance id is written in the same Update, in annotation
// HolderInstanceAnnotation. The annotation repeats the holder's name, so
// after someone else sets holderIdentity to another name (kubectl edit, an
// older agent) the left-over annotation does not apply and the instance
// reads as "": held by nobody's store until it expires.
//
// A leader Lease that cannot be read (missing or impossible
// leaseDurationSeconds, bad holder) is reported in Cluster.Problems, shown
// as held by dcs.UnknownHolder, never treated as held by this member, and may
// be taken over once it has not changed for the cluster config's ttl, so a
// cluster is not wedged forever. This is safe because a live holder changes
// the object's resourceVersion with every renew.
//
// An informer (one list+watch of Leases with the cluster's labels) feeds the
// cache that Cluster serves and signals Changes. Writes apply their result
// to the cache, so a store reads its own writes.
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/internal/record"
)

// Label keys and annotation keys.
const (
	DefaultManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue        = "mysqlha"
	DefaultClusterLabel   = "mysqlha.io/cluster"

	MemberAnnotation      = "mysqlha.io/member"
	ConfigAnnotation      = "mysqlha.io/config"
	SwitchoverAnnotation  = "mysqlha.io/switchover"
	InitializedAnnotation = "mysqlha.io/initialized"
	HistoryAnnotation     = "mysqlha.io/history"

	// HolderInstanceAnnotation on the leader Lease is "<holder>/<instance>":
	// the holderIdentity it was written for and that holder's agent
	// instance id, so that it does not outlive a change of holderIdentity
	// made by someone who did not rewrite it.
	HolderInstanceAnnotation = "mysqlha.io/holder-instance"
)

const (
	// casAttempts bounds retries of a lost compare-and-set on the state
	// object (different records share it).
	casAttempts = 10
)

// RBACRules returns the namespace-scoped rules the backend needs, and no
// more: list and watch feed the informer; get re-reads an object after a
// lost compare-and-set or when the cache lags a hand-over; create makes the
// leader, member and state Leases; update is every compare-and-set. Nothing
// is ever deleted or patched.
func RBACRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{coordinationv1.GroupName},
		Resources: []string{"leases"},
		Verbs:     []string{"get", "list", "watch", "create", "update"},
	}}
}

// Options configure a Store.
type Options struct {
	// Leases is the only client the store needs (e.g. a clientset's
	// CoordinationV1()). Prefer a rest.Config with the protobuf content
	// type: watch events are then cheaper to decode (see BenchmarkKubernetes).
	Leases coordinationclient.LeasesGetter
	// Namespace holds the cluster's objects.
	Namespace string
	// Cluster and Member name this store (both required).
	Cluster, Member string
	// Instance is the agent instance id this store writes into the leader
	// Lease and the member record (dcs.ValidateInstance); a random one when
	// empty.
	Instance string
	// Clock judges expiry and staleness; clock.RealClock{} when nil.
	Clock clock.Clock
	// Logger; zap.NewNop() when nil.
	Logger *zap.Logger
	// MemberTTL: observers judge this member's record stale when it has not
	// changed for this long; dcs.DefaultMemberTTL when 0.
	MemberTTL time.Duration
	// MemberRefresh is the longest UpdateMember goes without writing;
	// dcs.DefaultMemberRefresh when 0.
	MemberRefresh time.Duration
	// ManagedByLabel and ClusterLabel are the label keys;
	// DefaultManagedByLabel and DefaultClusterLabel when empty.
	ManagedByLabel, ClusterLabel string
}

type entry struct {
	lease    *coordinationv1.Lease
	observed time.Time
}

// Store is one member's view of one cluster in Kubernetes.
type Store struct {
	leases                       coordinationclient.LeaseInterface
	ns, cluster, name, instance  string
	leaderName, stateName, mpref string
	labels                       map[string]string
	clock                        clock.Clock
	log                          *zap.Logger
	memberTTL, memberRefresh     time.Duration
	changes                      chan struct{}
	synced                       <-chan struct{}
	cancel                       context.CancelFunc
	done                         chan struct{}
	closeOnce                    sync.Once

	lockMu   sync.Mutex // serializes lock operations
	held     *coordinationv1.Lease
	memberMu sync.Mutex // serializes member writes
	stateMu  sync.Mutex // serializes state writes of this store

	mu         sync.Mutex // guards the fields below
	objs       map[string]entry
	lastErr    error
	lastConfig dcs.Config
	lastMember *dcs.Member
	lastAt     time.Time
}

var _ dcs.Store = (*Store)(nil)

// New validates opts and starts the informer. It does not wait for the
// first list: Cluster does.
func New(opts Options) (*Store, error) {
	if opts.Leases == nil {
		return nil, fmt.Errorf("%w: Leases client is nil", dcs.ErrInvalid)
	}
	if opts.Namespace == "" {
		return nil, fmt.Errorf("%w: namespace is empty", dcs.ErrInvalid)
	}
	if err := dcs.ValidateName("cluster", opts.Cluster); err != nil {
		return nil, err
	}
	if err := dcs.ValidateName("member", opts.Member); err != nil {
		return nil, err
	}
	var err error
	if opts.Instance, err = record.StoreInstance(opts.Instance); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.ManagedByLabel == "" {
		opts.ManagedByLabel = DefaultManagedByLabel
	}
	if opts.ClusterLabel == "" {
		opts.ClusterLabel = DefaultClusterLabel
	}
	if opts.MemberTTL, opts.MemberRefresh, err = record.MemberTiming(opts.MemberTTL, opts.MemberRefresh); err != nil {
		return nil, err
	}
	lbls := map[string]string{opts.ManagedByLabel: ManagedByValue, opts.ClusterLabel: opts.Cluster}
	if _, err := labels.ValidatedSelectorFromSet(lbls); err != nil {
		return nil, fmt.Errorf("%w: labels: %v", dcs.ErrInvalid, err)
	}
	s := &Store{
		leases: opts.Leases.Leases(opts.Namespace),
		ns:     opts.Namespace, cluster: opts.Cluster, name: opts.Member, instance: opts.Instance,
		leaderName: opts.Cluster + "-leader", stateName: opts.Cluster + "-state", mpref: opts.Cluster + "-member-",
		labels: lbls, clock: opts.Clock,
		log: opts.Logger.Named("dcs-kubernetes").With(zap.String("namespace", opts.Namespace),
			zap.String("cluster", opts.Cluster), zap.String("member", opts.Member), zap.String("instance", opts.Instance)),
		memberTTL: opts.MemberTTL, memberRefresh: opts.MemberRefresh,
		changes: make(chan struct{}, 1), done: make(chan struct{}),
		objs: map[string]entry{}, lastConfig: dcs.DefaultConfig(),
	}
	if err := s.start(labels.SelectorFromSet(lbls).String()); err != nil {
		return nil, err
	}
	return s, nil
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

// Member implements dcs.Store.
func (s *Store) Member() string { return s.name }

// Instance implements dcs.Store.
func (s *Store) Instance() string { return s.instance }

// Changes implements dcs.Store.
func (s *Store) Changes() <-chan struct{} { return s.changes }

// Close stops the informer. This member's record stays and goes stale.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
	})
	return nil
}

// mapErr is the one place where Kubernetes API and transport errors become
// dcs sentinels.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: the API server did not answer in time: %w", op, dcs.ErrUnreachable, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %w: %v; grant the agent's ServiceAccount the Role of kubernetes.RBACRules "+
			"(leases: get, list, watch, create, update in its namespace; deploy/ has it)", op, dcs.ErrForbidden, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: %w: the API server rejected the credentials: %v", op, dcs.ErrForbidden, err)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrConflict, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrNotFound, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %w: the API server rejected the object: %v", op, dcs.ErrInvalid, err)
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrUnreachable, err)
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) {
		return fmt.Errorf("%s: %w: %v", op, dcs.ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
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
	return fmt.Errorf("%s: %w: leases in namespace %s not listed yet (last error: %v)", op, dcs.ErrUnreachable, s.ns, last)
}

func (s *Store) cached(name string) (*coordinationv1.Lease, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.objs[name]
	return e.lease, e.observed
}

// ---- reading ----

// leaderRecord is a parsed leader Lease.
type leaderRecord struct {
	holder      string // "" when released
	instance    string // "" when the Lease does not name the holder's instance
	ttl         time.Duration
	acquired    time.Time
	renewed     time.Time
	transitions int64
}

func where(l *coordinationv1.Lease) string {
	return fmt.Sprintf("Lease %s/%s", l.Namespace, l.Name)
}

func leaseTTL(l *coordinationv1.Lease) (time.Duration, error) {
	if l.Spec.LeaseDurationSeconds == nil {
		return 0, errors.New("leaseDurationSeconds is missing")
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	if d < dcs.MinTTL || d > dcs.MaxTTL {
		return 0, fmt.Errorf("impossible leaseDurationSeconds %d (want %v..%v)", *l.Spec.LeaseDurationSeconds, dcs.MinTTL, dcs.MaxTTL)
	}
	return d, nil
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
		return "", fmt.Errorf("annotation %s %q is not <holder>/<instance>", HolderInstanceAnnotation, raw)
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
	ld.Expired = !now.Before(observed.Add(ld.TTL))
	return ld
}

func hashVersion(v string) string {
	if v == "" {
		return ""
	}
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:8])
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
		m.Stale = !now.Before(e.observed.Add(ttl))
		c.Members = append(c.Members, m)
	}
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].Name < c.Members[j].Name })
	return c, nil
}

func (s *Store) parseMember(l *coordinationv1.Lease, member string) (dcs.Member, error) {
	var errs []error
	if _, err := leaseTTL(l); err != nil {
		errs = append(errs, err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != member {
		errs = append(errs, fmt.Errorf("holderIdentity %q does not match the member name %q", h, member))
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

// readState fills c from the state Lease; s.mu is held.
func (s *Store) readState(c *dcs.Cluster, l *coordinationv1.Lease) {
	at := func(key string) string { return where(l) + " annotation " + key }
	a := l.Annotations
	if raw, ok := a[ConfigAnnotation]; ok {
		cfg, err := record.DecodeConfig(at(ConfigAnnotation), []byte(raw))
		if err != nil {
			c.Problems = append(c.Problems, err)
			c.ConfigErr = err
		} else {
			c.Config, s.lastConfig = cfg, cfg
		}
		c.ConfigVersion = hashVersion(raw)
	}
	if raw, ok := a[SwitchoverAnnotation]; ok {
		sw, err := record.DecodeSwitchover(at(SwitchoverAnnotation), []byte(raw))
		if err != nil {
			c.Problems = append(c.Problems, err)
			sw.Err = err
		}
		sw.Version = hashVersion(raw)
		c.Switchover = &sw
	}
	if raw, ok := a[InitializedAnnotation]; ok {
		in, err := record.DecodeInitialized(at(InitializedAnnotation), []byte(raw))
		if err != nil {
			c.Problems = append(c.Problems, err)
			in.Err = err
		}
		in.Version = hashVersion(raw)
		c.Initialized = &in
	}
	if raw, ok := a[HistoryAnnotation]; ok {
		h, err := record.DecodeHistory(at(HistoryAnnotation), []byte(raw))
		if err != nil {
			c.Problems = append(c.Problems, err)
		}
		c.History = h
	}
}

// ---- writing ----

// newLease returns an empty Lease of this cluster named name.
func (s *Store) newLease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}}
}

// own re-asserts the labels that make the object visible to the informers.
func (s *Store) own(l *coordinationv1.Lease) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	for k, v := range s.labels {
		l.Labels[k] = v
	}
}

// write creates l (when create) or updates it on its resourceVersion, and
// applies the result to the cache.
func (s *Store) write(ctx context.Context, l *coordinationv1.Lease, create bool) (*coordinationv1.Lease, error) {
	s.own(l)
	var res *coordinationv1.Lease
	var err error
	if create {
		l.ResourceVersion = ""
		res, err = s.leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		res, err = s.leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	s.observe(res, false)
	return res, nil
}

// fetch reads name from the API server (the cache may lag) and applies it to
// the cache. It returns nil, nil when the object does not exist. An object
// without this cluster's labels is not ours: ErrCorrupt, naming the fix.
func (s *Store) fetch(ctx context.Context, op, name string) (*coordinationv1.Lease, error) {
	l, err := s.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	for k, v := range s.labels {
		if l.Labels[k] != v {
			return nil, fmt.Errorf("%s: %w: %s exists without label %s=%s, so it was not made by this cluster's agents; delete or relabel it",
				op, dcs.ErrCorrupt, where(l), k, v)
		}
	}
	s.observe(l, false)
	return l, nil
}

func (s *Store) ttlOf(ttl time.Duration) *int32 { return ptr.To(int32(ttl / time.Second)) }

func (s *Store) now() *metav1.MicroTime { return ptr.To(metav1.NewMicroTime(s.clock.Now())) }

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
		if cur := hashVersion(ann[ConfigAnnotation]); cur != version {
			return fmt.Errorf("%w: config version is %q, caller expected %q", dcs.ErrConflict, cur, version)
		}
		ann[ConfigAnnotation] = string(data)
		return nil
	})
}

// RequestSwitchover implements dcs.Store.
func (s *Store) RequestSwitchover(ctx context.Context, sw dcs.Switchover) error {
	const op = "requesting switchover"
	if sw.RequestedAt.IsZero() {
		sw.RequestedAt = s.clock.Now()
	}
	data, err := record.EncodeSwitchover(sw)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.updateState(ctx, op, func(ann map[string]string) error {
		if cur, ok := ann[SwitchoverAnnotation]; ok {
			return fmt.Errorf("%w: a switchover request is already pending: %s", dcs.ErrExists, cur)
		}
		ann[SwitchoverAnnotation] = string(data)
		return nil
	})
}

// ClearSwitchover implements dcs.Store.
func (s *Store) ClearSwitchover(ctx context.Context, version string) error {
	return s.updateState(ctx, "clearing switchover request", func(ann map[string]string) error {
		cur, ok := ann[SwitchoverAnnotation]
		switch {
		case !ok:
			return fmt.Errorf("%w: no switchover request is pending", dcs.ErrNotFound)
		case hashVersion(cur) != version:
			return fmt.Errorf("%w: request version is %q, caller expected %q", dcs.ErrConflict, hashVersion(cur), version)
		}
		delete(ann, SwitchoverAnnotation)
		return nil
	})
}

// SetInitialized implements dcs.Store.
func (s *Store) SetInitialized(ctx context.Context, in dcs.Initialized) error {
	const op = "recording cluster initialization"
	if in.At.IsZero() {
		in.At = s.clock.Now()
	}
	data, err := record.EncodeInitialized(in)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.updateState(ctx, op, func(ann map[string]string) error {
		if cur, ok := ann[InitializedAnnotation]; ok {
			return fmt.Errorf("%w: cluster already initialized: %s", dcs.ErrExists, cur)
		}
		ann[InitializedAnnotation] = string(data)
		return nil
	})
}

// AppendHistory implements dcs.Store. A stored history that cannot be read
// is replaced (it was already reported in Cluster.Problems).
func (s *Store) AppendHistory(ctx context.Context, e dcs.HistoryEntry) error {
	const op = "appending history"
	if err := record.ValidateHistoryEntry(e); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.updateState(ctx, op, func(ann map[string]string) error {
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
	})
}
