package podrole

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

const (
	// ManagedBy is the endpointslice.kubernetes.io/managed-by label of the
	// EndpointSlice the primary writes, so that the EndpointSlice
	// controllers leave it alone.
	ManagedBy = "agent.mysqlha.io"
	// RoutePortName is the name the routed Service's port must have: the
	// slice's port of that name is the one kube-proxy maps it to.
	RoutePortName = "mysql"
)

// SliceClient reads and writes EndpointSlices, with client-go's typed
// signatures.
type SliceClient interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (*discoveryv1.EndpointSlice, error)
	Create(ctx context.Context, s *discoveryv1.EndpointSlice, o metav1.CreateOptions) (*discoveryv1.EndpointSlice, error)
	Update(ctx context.Context, s *discoveryv1.EndpointSlice, o metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error)
}

// PrimaryRoute points a Service without a selector at the primary: the
// member that has just become writable writes the Service's one
// EndpointSlice, named after the Service, with its own pod's address. The
// route moves from the old primary to the new in one update, so the Service
// never goes through a moment without an endpoint, and kube-proxy
// reprograms it once. A Service that selects the primary label changes
// twice instead (the old pod out, then the new one in); kube-proxy applies
// the second change only after its minimum sync interval (1 s by default),
// and a connection attempted as its rules change from "reject" to
// "forward" can lose its SYN, another second.
//
// Nothing takes a fenced primary out of the route: it answers read-only
// until the next primary replaces it, so the route never holds two
// members.
type PrimaryRoute struct {
	slices    SliceClient
	namespace string
	service   string
	port      int32
	log       *zap.Logger
}

// NewPrimaryRoute returns the route of service, a Service in namespace
// without a selector whose port is named RoutePortName; port is mysqld's
// port in the pods.
func NewPrimaryRoute(slices SliceClient, namespace, service string, port int, logger *zap.Logger) (*PrimaryRoute, error) {
	if slices == nil {
		return nil, errors.New("podrole: nil EndpointSlice client")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("podrole: invalid namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(service); len(errs) > 0 {
		return nil, fmt.Errorf("podrole: invalid Service name %q: %s", service, strings.Join(errs, "; "))
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("podrole: mysqld port %d is not within 1-65535", port)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &PrimaryRoute{slices: slices, namespace: namespace, service: service, port: int32(port),
		log: logger.Named("route").With(zap.String("namespace", namespace), zap.String("service", service))}, nil
}

// To makes pod, at ip, the Service's one endpoint. It reads the slice (a
// quorum read) and writes only when it says otherwise, creating it when
// missing. The write carries the version it read: a concurrent writer is a
// conflict, returned for the caller to try again.
func (r *PrimaryRoute) To(ctx context.Context, pod, ip string) error {
	if err := r.to(ctx, pod, ip); err != nil {
		return fmt.Errorf("routing Service %s to pod %s (%s): %w", r.service, pod, ip, err)
	}
	return nil
}

func (r *PrimaryRoute) to(ctx context.Context, pod, ip string) error {
	if err := validatePodName(pod); err != nil {
		return err
	}
	want, err := r.slice(pod, ip)
	if err != nil {
		return err
	}
	cur, err := r.slices.Get(ctx, r.service, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := r.slices.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return r.apiError(err, "create")
		}
		r.log.Info("primary routed", zap.String("pod", pod), zap.String("ip", ip), zap.String("from", "none"))
		return nil
	case err != nil:
		return r.apiError(err, "get")
	}
	if routes(cur, want) {
		return nil
	}
	if cur.AddressType != want.AddressType {
		return fmt.Errorf("the EndpointSlice %s holds %s addresses and %s is %s: delete it (kubectl delete endpointslice %s), and the primary writes it again",
			r.service, cur.AddressType, ip, want.AddressType, r.service)
	}
	want.ResourceVersion = cur.ResourceVersion
	if _, err := r.slices.Update(ctx, want, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return r.apiError(err, "update")
	}
	r.log.Info("primary routed", zap.String("pod", pod), zap.String("ip", ip), zap.String("from", routedPod(cur)))
	return nil
}

// slice is the EndpointSlice that routes the Service to pod at ip.
func (r *PrimaryRoute) slice(pod, ip string) (*discoveryv1.EndpointSlice, error) {
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return nil, fmt.Errorf("pod address %q is not an IP address (env POD_IP, from status.podIP)", ip)
	}
	family := discoveryv1.AddressTypeIPv6
	if parsed.To4() != nil {
		family = discoveryv1.AddressTypeIPv4
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: r.service, Namespace: r.namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: r.service,
			discoveryv1.LabelManagedBy:   ManagedBy,
		}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{parsed.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: r.namespace, Name: pod},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(RoutePortName), Port: ptr.To(r.port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, nil
}

// routes reports whether cur already routes as want does.
func routes(cur, want *discoveryv1.EndpointSlice) bool {
	if cur.AddressType != want.AddressType || len(cur.Endpoints) != 1 || len(cur.Ports) != 1 ||
		cur.Labels[discoveryv1.LabelServiceName] != want.Labels[discoveryv1.LabelServiceName] ||
		cur.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		return false
	}
	e, w := cur.Endpoints[0], want.Endpoints[0]
	p, wp := cur.Ports[0], want.Ports[0]
	return len(e.Addresses) == 1 && e.Addresses[0] == w.Addresses[0] &&
		e.TargetRef != nil && e.TargetRef.Name == w.TargetRef.Name &&
		ptr.Deref(e.Conditions.Ready, false) && ptr.Deref(e.Conditions.Serving, false) && !ptr.Deref(e.Conditions.Terminating, false) &&
		ptr.Deref(p.Name, "") == RoutePortName && ptr.Deref(p.Port, 0) == ptr.Deref(wp.Port, 0) &&
		ptr.Deref(p.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP
}

// routedPod names the pod cur routes to, for the log.
func routedPod(cur *discoveryv1.EndpointSlice) string {
	var names []string
	for _, e := range cur.Endpoints {
		if e.TargetRef != nil {
			names = append(names, e.TargetRef.Name)
		} else {
			names = append(names, strings.Join(e.Addresses, ","))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " ")
}

func (r *PrimaryRoute) apiError(err error, verb string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%w: the agent may not %s endpointslices in namespace %s; apply the RBAC in deploy/ (podrole.RBACRules): %w",
		ErrForbidden, verb, r.namespace, err)
}
