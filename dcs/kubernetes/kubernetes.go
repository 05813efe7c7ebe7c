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
//	                                 mysqlha.io/switchover, mysqlha.io/reinit,
//	                                 mysqlha.io/restart,
//	                                 mysqlha.io/initialized,
//	                                 mysqlha.io/history (JSON each)
//
// Why Leases for the state too, rather than a ConfigMap: the agent then needs
// exactly one resource in its Role (leases: get, list, watch, create, update;
// no delete, no patch; deploy/ grants just that), and one watch covers
// every object of the cluster. Only DeleteMember (`agentctl remove`)
// deletes: a member Lease gone stale, with the operator's credentials. The
// state records share one object, so each record's version is a hash of
// its annotation: compare-and-set is by content (an update of the history
// does not invalidate a pending switchover's version), made atomic by the
// object's resourceVersion.
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
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
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
	ReinitAnnotation      = "mysqlha.io/reinit"
	RestartAnnotation     = "mysqlha.io/restart"
	InitializedAnnotation = "mysqlha.io/initialized"
	HistoryAnnotation     = "mysqlha.io/history"

	// HolderInstanceAnnotation on the leader Lease is "<holder>/<instance>":
	// the holderIdentity it was written for and that holder's agent
	// instance id, so that it does not outlive a change of holderIdentity
	// made by someone who did not rewrite it.
	HolderInstanceAnnotation = "mysqlha.io/holder-instance"
)

// RBACRules returns the namespace-scoped rules the backend needs, and no
// more: list and watch feed the informer; get re-reads an object after a
// lost compare-and-set or when the cache lags a hand-over; create makes the
// leader, member and state Leases; update is every compare-and-set. Nothing
// is ever deleted or patched by an agent (DeleteMember is agentctl's).
func RBACRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{coordinationv1.GroupName},
		Resources: []string{"leases"},
		Verbs:     []string{"get", "list", "watch", "create", "update"},
	}}
}

// LeaseClient is the Lease API of one namespace, with the signatures of
// client-go's typed LeaseInterface, which satisfies it as
// internal/kubeclient's Leases does.
type LeaseClient interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error)
	List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Delete(ctx context.Context, name string, o metav1.DeleteOptions) error
}

// Options configure a Store.
type Options struct {
	// Leases is the only client the store needs: the Lease API of
	// Namespace (internal/kubeclient's, or a clientset's
	// CoordinationV1().Leases(Namespace)). Prefer a rest.Config with the
	// protobuf content type: watch events are then cheaper to decode (see
	// BenchmarkKubernetes).
	Leases LeaseClient
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

// Store is one member's view of one cluster in Kubernetes.
type Store struct {
	leases                       LeaseClient
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
	o, err := record.StoreOptions{
		Member: opts.Member, Instance: opts.Instance, Clock: opts.Clock, Logger: opts.Logger,
		MemberTTL: opts.MemberTTL, MemberRefresh: opts.MemberRefresh,
	}.WithDefaults()
	if err != nil {
		return nil, err
	}
	if opts.ManagedByLabel == "" {
		opts.ManagedByLabel = DefaultManagedByLabel
	}
	if opts.ClusterLabel == "" {
		opts.ClusterLabel = DefaultClusterLabel
	}
	lbls := map[string]string{opts.ManagedByLabel: ManagedByValue, opts.ClusterLabel: opts.Cluster}
	if _, err := labels.ValidatedSelectorFromSet(lbls); err != nil {
		return nil, fmt.Errorf("%w: labels: %v", dcs.ErrInvalid, err)
	}
	s := &Store{
		leases: opts.Leases,
		ns:     opts.Namespace, cluster: opts.Cluster, name: o.Member, instance: o.Instance,
		leaderName: opts.Cluster + "-leader", stateName: opts.Cluster + "-state", mpref: opts.Cluster + "-member-",
		labels: lbls, clock: o.Clock,
		// The caller's logger names the cluster and member once.
		log:       o.Logger.Named("dcs-kubernetes").With(zap.String("namespace", opts.Namespace), zap.String("instance", o.Instance)),
		memberTTL: o.MemberTTL, memberRefresh: o.MemberRefresh,
		changes: make(chan struct{}, 1), done: make(chan struct{}),
		objs: map[string]entry{}, lastConfig: dcs.DefaultConfig(),
	}
	if err := s.start(labels.SelectorFromSet(lbls).String()); err != nil {
		return nil, err
	}
	return s, nil
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

// where names l in errors.
func where(l *coordinationv1.Lease) string {
	return fmt.Sprintf("Lease %s/%s", l.Namespace, l.Name)
}

// leaseTTL reads l's leaseDurationSeconds, which must lie within
// dcs.MinTTL..dcs.MaxTTL.
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

// ttlOf is ttl as a Lease's leaseDurationSeconds.
func (s *Store) ttlOf(ttl time.Duration) *int32 { return ptr.To(int32(ttl / time.Second)) }

// now is this store's clock's time as a Lease timestamp.
func (s *Store) now() *metav1.MicroTime { return ptr.To(metav1.NewMicroTime(s.clock.Now())) }
