package podrole

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
)

const (
	// DefaultClusterLabel is the default key of the label naming a pod's
	// cluster.
	DefaultClusterLabel = "mysqlha.io/cluster"
	// DefaultRoleLabel is the default key of the label holding a pod's role.
	DefaultRoleLabel = "mysqlha.io/role"

	// FieldManager is the field manager of every write, so that
	// metadata.managedFields shows which labels the agent owns.
	FieldManager = "mysqlha-agent"
)

// ErrForbidden is wrapped by every error caused by a 403 from the API server:
// the agent's ServiceAccount lacks a verb that RBACRules grants. The error
// text names the verb, the resource and the namespace.
var ErrForbidden = errors.New("podrole: forbidden by RBAC")

// The values of the role label. They are what the Services select on, so
// they are spelled here rather than taken from dcs.Role's String.
const (
	// LabelPrimary marks dcs.RolePrimary; the primary Service selects it.
	LabelPrimary = "primary"
	// LabelReplica marks dcs.RoleReplica; the replicas Service selects it.
	LabelReplica = "replica"
	// noLabel names the absent label in logs and errors.
	noLabel = "none"
)

// labelValue is role's label value. dcs.RoleUnknown has none (ok true,
// value ""): the member is not healthy enough to receive traffic (unhealthy,
// errant, fenced, starting), so its role label is removed. ok is false for a
// role outside dcs's enum.
func labelValue(role dcs.Role) (value string, ok bool) {
	switch role {
	case dcs.RoleUnknown:
		return "", true
	case dcs.RolePrimary:
		return LabelPrimary, true
	case dcs.RoleReplica:
		return LabelReplica, true
	}
	return "", false
}

// roleName is role as logs and errors name it: its label value, "none"
// for no label.
func roleName(role dcs.Role) string {
	v, ok := labelValue(role)
	switch {
	case !ok:
		return role.String()
	case v == "":
		return noLabel
	}
	return v
}

// LabelKeys are the keys of the labels the Labeler writes. An empty field
// takes its default (DefaultClusterLabel, DefaultRoleLabel).
type LabelKeys struct {
	Cluster string
	Role    string
}

// withDefaults fills empty keys with the defaults.
func (k LabelKeys) withDefaults() LabelKeys {
	if k.Cluster == "" {
		k.Cluster = DefaultClusterLabel
	}
	if k.Role == "" {
		k.Role = DefaultRoleLabel
	}
	return k
}

// Validate reports whether both keys (after defaulting) are valid label keys
// (qualified names such as "example.com/role") and distinct.
func (k LabelKeys) Validate() error {
	k = k.withDefaults()
	for _, f := range []struct{ field, key string }{{"cluster", k.Cluster}, {"role", k.Role}} {
		if errs := validation.IsQualifiedName(f.key); len(errs) > 0 {
			return fmt.Errorf("podrole: invalid %s label key %q: %s", f.field, f.key, strings.Join(errs, "; "))
		}
	}
	if k.Cluster == k.Role {
		return fmt.Errorf("podrole: cluster and role label keys are both %q; they must differ", k.Cluster)
	}
	return nil
}

// Client is the API the Labeler uses, in its namespace: internal/kubeclient's
// Pods and Events, or a clientset's CoreV1().Pods(ns) and .Events(ns).
type Client struct {
	Pods   PodClient
	Events EventClient
}

// PodClient reads and patches pods, with client-go's typed signatures.
type PodClient interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

// EventClient creates Events, with client-go's typed signature.
type EventClient interface {
	Create(ctx context.Context, ev *corev1.Event, o metav1.CreateOptions) (*corev1.Event, error)
}

// Option configures NewLabeler.
type Option func(*settings)

// WithClock sets the clock that timestamps Events (default: the real clock).
func WithClock(c clock.PassiveClock) Option {
	return func(s *settings) { s.clock = c }
}

type settings struct {
	clock clock.PassiveClock
	// eventTimeout bounds the writing of one Event (its pod GET and create).
	eventTimeout time.Duration
	// closeTimeout bounds how long Close waits for queued Events.
	closeTimeout time.Duration
	// queueSize is how many Events may wait; the agent emits a few per role
	// change, so a full queue means the API server has been unreachable for
	// a while and older news is worth more than newer.
	queueSize int
}

func defaultSettings() settings {
	return settings{
		clock:        clock.RealClock{},
		eventTimeout: 5 * time.Second,
		closeTimeout: 5 * time.Second,
		queueSize:    32,
	}
}

// Labeler writes the role label of pods of one cluster in one namespace and
// records Events about them. It is safe for concurrent use. Close it to flush
// queued Events.
type Labeler struct {
	pods      PodClient
	events    EventClient
	namespace string
	keys      LabelKeys
	reporter  string
	log       *zap.Logger
	settings

	// The Event writer: one goroutine drains queue until it is closed.
	mu        sync.Mutex // guards closed and sends on queue
	closed    bool
	queue     chan queuedEvent
	writerCtx context.Context // cancelled when Close gives up waiting
	cancel    context.CancelFunc
	done      chan struct{} // closed when the writer has exited
	closeOnce sync.Once
}

// NewLabeler returns a Labeler for pods in namespace, writing labels keys
// (zero fields take the defaults). reporter names the agent in the Events it
// records (their reportingInstance and source.host), typically the agent's
// own pod name. It starts the Event writer goroutine; call Close when done.
func NewLabeler(client Client, namespace string, keys LabelKeys, reporter string, logger *zap.Logger, opts ...Option) (*Labeler, error) {
	s := defaultSettings()
	for _, o := range opts {
		o(&s)
	}
	return newLabeler(client, namespace, keys, reporter, logger, s)
}

func newLabeler(client Client, namespace string, keys LabelKeys, reporter string, logger *zap.Logger, s settings) (*Labeler, error) {
	if client.Pods == nil || client.Events == nil {
		return nil, errors.New("podrole: nil pod or event client")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("podrole: invalid namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if err := keys.Validate(); err != nil {
		return nil, err
	}
	// The API server limits reportingInstance to 128 characters.
	if reporter == "" || len(reporter) > 128 {
		return nil, fmt.Errorf("podrole: reporter %q must be 1 to 128 characters", reporter)
	}
	if s.clock == nil {
		return nil, errors.New("podrole: nil clock")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Labeler{
		pods:      client.Pods,
		events:    client.Events,
		namespace: namespace,
		keys:      keys.withDefaults(),
		reporter:  reporter,
		log:       logger.Named("podrole").With(zap.String("namespace", namespace)),
		settings:  s,
		queue:     make(chan queuedEvent, s.queueSize),
		writerCtx: ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
	}
	go l.writeEvents()
	return l, nil
}

// Keys returns the label keys the Labeler writes, defaults filled in.
func (l *Labeler) Keys() LabelKeys { return l.keys }

// SetRole makes pod carry the cluster label = cluster and the role label =
// role; dcs.RoleUnknown removes the role label (the cluster label stays). It reads
// the pod (GET) and writes only if the labels differ, with a JSON merge patch
// of exactly those two labels, so calling it every loop costs one read and
// no write. The write is unconditional (no resourceVersion): the pod's own
// agent is the authority on its role, and the last word should be its.
func (l *Labeler) SetRole(ctx context.Context, pod, cluster string, role dcs.Role) error {
	if err := l.setRole(ctx, pod, cluster, role); err != nil {
		return fmt.Errorf("labelling pod %s as %s: %w", pod, roleName(role), err)
	}
	return nil
}

func (l *Labeler) setRole(ctx context.Context, pod, cluster string, role dcs.Role) error {
	if err := validatePodName(pod); err != nil {
		return err
	}
	if cluster == "" {
		return errors.New("empty cluster name")
	}
	if errs := validation.IsValidLabelValue(cluster); len(errs) > 0 {
		return fmt.Errorf("cluster name %q is not a valid label value: %s", cluster, strings.Join(errs, "; "))
	}
	value, ok := labelValue(role)
	if !ok {
		return fmt.Errorf("unknown role %s", role)
	}
	// A quorum read rather than the watch cache (resourceVersion "0"): a
	// stale "already labelled" would skip a needed write, and a caller that
	// only calls on change would never correct it.
	cur, err := l.pods.Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return l.apiError(err, "get", "pods")
	}
	if hasLabels(cur.Labels, l.keys, cluster, value) {
		return nil
	}
	patch, err := setRolePatch(l.keys, cluster, value)
	if err != nil {
		return err
	}
	if _, err := l.pods.Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return l.apiError(err, "patch", "pods")
	}
	l.log.Info("pod role label set",
		zap.String("pod", pod), zap.String("cluster_label", cluster),
		zap.String("from", roleOf(cur.Labels, l.keys)), zap.String("to", roleName(role)))
	return nil
}

// RemovePrimary removes pod's role label if, and only if, it is "primary":
// a new leader uses it to take the old leader out of the primary Service. It
// is one JSON patch whose "test" operation makes the API server apply the
// removal atomically with the check, so a concurrent relabel to "replica" by
// the old leader's agent is never undone. A pod that is not primary (the
// test fails: 422) or does not exist (404) is success: either way it is not
// in the primary Service.
func (l *Labeler) RemovePrimary(ctx context.Context, pod string) error {
	if err := validatePodName(pod); err != nil {
		return fmt.Errorf("removing primary label of pod %s: %w", pod, err)
	}
	patch, err := removePrimaryPatch(l.keys)
	if err != nil {
		return fmt.Errorf("removing primary label of pod %s: %w", pod, err)
	}
	_, err = l.pods.Patch(ctx, pod, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		l.log.Info("primary label removed", zap.String("pod", pod))
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsInvalid(err):
		// The API server answers 422 exactly when the JSON patch does not
		// apply: the test failed or the label is absent. Removing a label
		// cannot make a pod invalid, so there is no other 422 here. A 409
		// is not mapped: it means the server's own retries lost to
		// concurrent writers, not that the label changed, so the caller
		// must retry.
		return nil
	default:
		return fmt.Errorf("removing primary label of pod %s: %w", pod, l.apiError(err, "patch", "pods"))
	}
}

// PodGone reports whether pod does not exist: true only on the API
// server's 404, from a quorum read (a watch cache could still hold a
// deleted pod, or miss a new one). Any other failure is an error, and the
// pod is not known to be gone.
func (l *Labeler) PodGone(ctx context.Context, pod string) (bool, error) {
	if err := validatePodName(pod); err != nil {
		return false, err
	}
	_, err := l.pods.Get(ctx, pod, metav1.GetOptions{})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsNotFound(err):
		return true, nil
	default:
		return false, fmt.Errorf("reading pod %s: %w", pod, l.apiError(err, "get", "pods"))
	}
}

// PodDown says why the kubelet reports every container of pod, as the pod
// of that UID, not running: each container's state, "mariadb: terminated
// (Error, exit 137); agent: waiting (PodInitializing)". "" while any
// container runs, when the pod has no container status yet, or when the
// pod of that name is another one (deleted and made again: the old one's
// containers may still run on a node cut off from the API server, and only
// its own status could tell). Read from a quorum read, as PodGone.
func (l *Labeler) PodDown(ctx context.Context, pod, uid string) (string, error) {
	if err := validatePodName(pod); err != nil {
		return "", err
	}
	p, err := l.pods.Get(ctx, pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading pod %s: %w", pod, l.apiError(err, "get", "pods"))
	case uid == "" || string(p.UID) != uid || len(p.Status.ContainerStatuses) == 0:
		return "", nil
	}
	var states []string
	for _, c := range p.Status.ContainerStatuses {
		switch st := c.State; {
		case st.Running != nil:
			return "", nil
		case st.Terminated != nil:
			states = append(states, fmt.Sprintf("%s: terminated (%s, exit %d)", c.Name, cmp.Or(st.Terminated.Reason, "no reason"), st.Terminated.ExitCode))
		case st.Waiting != nil:
			states = append(states, fmt.Sprintf("%s: waiting (%s)", c.Name, cmp.Or(st.Waiting.Reason, "no reason")))
		default:
			states = append(states, c.Name+": not started")
		}
	}
	return strings.Join(states, "; "), nil
}

// apiError names the missing permission and the fix when err is a 403, and
// otherwise returns err unchanged. Both errors stay inspectable with
// errors.Is(err, ErrForbidden) and apierrors.IsForbidden.
func (l *Labeler) apiError(err error, verb, resource string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%w: the agent may not %s %s in namespace %s; apply the RBAC in deploy/ (podrole.RBACRules): %w",
		ErrForbidden, verb, resource, l.namespace, err)
}

func validatePodName(pod string) error {
	if errs := validation.IsDNS1123Subdomain(pod); len(errs) > 0 {
		return fmt.Errorf("invalid pod name %q: %s", pod, strings.Join(errs, "; "))
	}
	return nil
}

// hasLabels reports whether labels already are what SetRole would write;
// value "" is no role label.
func hasLabels(labels map[string]string, k LabelKeys, cluster, value string) bool {
	if c, ok := labels[k.Cluster]; !ok || c != cluster {
		return false
	}
	v, ok := labels[k.Role]
	if value == "" {
		return !ok
	}
	return ok && v == value
}

func roleOf(labels map[string]string, k LabelKeys) string {
	if v, ok := labels[k.Role]; ok {
		return v
	}
	return noLabel
}

// setRolePatch is the JSON merge patch (RFC 7386) of SetRole: the two labels
// and nothing else; value "" becomes null, which deletes the role label.
func setRolePatch(k LabelKeys, cluster, value string) ([]byte, error) {
	var roleValue any // nil marshals to null
	if value != "" {
		roleValue = value
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"labels": map[string]any{k.Cluster: cluster, k.Role: roleValue},
		},
	})
}

// removePrimaryPatch is the JSON patch (RFC 6902) of RemovePrimary.
func removePrimaryPatch(k LabelKeys) ([]byte, error) {
	path := "/metadata/labels/" + escapeJSONPointer(k.Role)
	return json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": LabelPrimary},
		{"op": "remove", "path": path},
	})
}

// escapeJSONPointer escapes one reference token (RFC 6901): label keys
// contain "/".
func escapeJSONPointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// podRef is the involvedObject of an Event about pod. uid may be empty when
// the pod could not be read; kubectl describe then does not list the Event.
func (l *Labeler) podRef(pod string, uid types.UID) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: l.namespace, Name: pod, UID: uid}
}
