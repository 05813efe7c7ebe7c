package podrole_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mysqlha/mysqlha/agent/podrole"
)

func route(t *testing.T, client kubernetes.Interface, ns string, logger *zap.Logger) *podrole.PrimaryRoute {
	t.Helper()
	r, err := podrole.NewPrimaryRoute(client.DiscoveryV1().EndpointSlices(ns), ns, "db-primary", 3306, logger)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewPrimaryRouteRejectsBadConfig(t *testing.T) {
	var slices podrole.SliceClient = kubernetes.New(nil).DiscoveryV1().EndpointSlices("db")
	for _, tc := range []struct {
		name, ns, service string
		port              int
		want              string
	}{
		{"BadNamespace", "DB", "db-primary", 3306, `invalid namespace "DB"`},
		{"BadService", "db", "db.primary", 3306, `invalid Service name "db.primary"`},
		{"NoService", "db", "", 3306, `invalid Service name ""`},
		{"PortZero", "db", "db-primary", 0, "mysqld port 0 is not within 1-65535"},
		{"PortTooHigh", "db", "db-primary", 70000, "mysqld port 70000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := podrole.NewPrimaryRoute(slices, tc.ns, tc.service, tc.port, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
	if _, err := podrole.NewPrimaryRoute(nil, "db", "db-primary", 3306, nil); err == nil {
		t.Fatal("a nil client was accepted")
	}
}

// The route on a real API server: created on first use, a no-op when it
// already says so, moved from one pod to the next in one update, and
// never silently overwritten on a conflict or a family change.
func (e *env) testPrimaryRoute(t *testing.T) {
	t.Parallel()
	ns := e.namespace(t)
	r := route(t, e.admin, ns, nil)
	c := ctx(t)
	slices := e.admin.DiscoveryV1().EndpointSlices(ns)
	get := func() *discoveryv1.EndpointSlice {
		t.Helper()
		s, err := slices.Get(c, "db-primary", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	wantRoute := func(step, pod, ip string) *discoveryv1.EndpointSlice {
		t.Helper()
		s := get()
		if len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 || s.Endpoints[0].Addresses[0] != ip ||
			s.Endpoints[0].TargetRef == nil || s.Endpoints[0].TargetRef.Name != pod || !*s.Endpoints[0].Conditions.Ready ||
			s.Labels[discoveryv1.LabelServiceName] != "db-primary" || s.Labels[discoveryv1.LabelManagedBy] != podrole.ManagedBy ||
			len(s.Ports) != 1 || *s.Ports[0].Name != podrole.RoutePortName || *s.Ports[0].Port != 3306 {
			t.Fatalf("%s: slice %+v, want one ready endpoint %s of pod %s", step, s, ip, pod)
		}
		return s
	}

	if err := r.To(c, "db-0", "198.18.0.10"); err != nil {
		t.Fatalf("first route: %v", err)
	}
	first := wantRoute("created", "db-0", "198.18.0.10")
	if err := r.To(c, "db-0", "198.18.0.10"); err != nil {
		t.Fatal(err)
	}
	if s := get(); s.ResourceVersion != first.ResourceVersion {
		t.Fatalf("routing again to the same pod wrote the slice: %s -> %s", first.ResourceVersion, s.ResourceVersion)
	}
	if err := r.To(c, "db-1", "198.18.0.11"); err != nil {
		t.Fatalf("moving the route: %v", err)
	}
	wantRoute("moved", "db-1", "198.18.0.11")

	// Another agent's write between our read and our update is a conflict,
	// never overwritten.
	stale := &conflictingSlices{SliceClient: slices, other: slices}
	rr, err := podrole.NewPrimaryRoute(stale, ns, "db-primary", 3306, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rr.To(c, "db-2", "198.18.0.12"); !apierrors.IsConflict(err) {
		t.Fatalf("a concurrent write: %v, want a conflict", err)
	}
	wantRoute("after the conflict", "db-0", "198.18.0.10")

	// An IPv6 pod cannot be put in an IPv4 slice: the error says what to do.
	if err := r.To(c, "db-2", "fd00::12"); err == nil || !strings.Contains(err.Error(), "kubectl delete endpointslice db-primary") {
		t.Fatalf("IPv6 into an IPv4 slice: %v, want the fix named", err)
	}
	if err := r.To(c, "db-2", "not-an-ip"); err == nil || !strings.Contains(err.Error(), `pod address "not-an-ip" is not an IP address`) {
		t.Fatalf("a bad address: %v", err)
	}
	wantRoute("after the refusals", "db-0", "198.18.0.10")
}

// conflictingSlices lets another writer move the route to db-0 between the
// Get and the Update.
type conflictingSlices struct {
	podrole.SliceClient
	other podrole.SliceClient
}

func (s *conflictingSlices) Update(ctx context.Context, sl *discoveryv1.EndpointSlice, o metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	cur, err := s.other.Get(ctx, sl.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cur.Endpoints[0].Addresses = []string{"198.18.0.10"}
	cur.Endpoints[0].TargetRef.Name = "db-0"
	if _, err := s.other.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	return s.SliceClient.Update(ctx, sl, o)
}

// RBACRules' endpointslices rule suffices, and each of its verbs is needed.
func (e *env) testPrimaryRouteRBAC(t *testing.T) {
	t.Parallel()
	rule := func(verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: verbs}
	}
	for _, tc := range []struct {
		name string
		rule rbacv1.PolicyRule
		want string // "" = both routes succeed
	}{
		{"RBACRules", podrole.RBACRules()[len(podrole.RBACRules())-1], ""},
		{"NoGet", rule("create", "update"), "may not get endpointslices"},
		{"NoCreate", rule("get", "update"), "may not create endpointslices"},
		{"NoUpdate", rule("get", "create"), "may not update endpointslices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := e.namespace(t)
			e.grant(t, ns, []rbacv1.PolicyRule{tc.rule})
			core, logs := observer.New(zap.InfoLevel)
			r := route(t, e.unpriv, ns, zap.New(core))
			c := ctx(t)
			err := r.To(c, "db-0", "198.18.0.10")
			if err == nil {
				err = r.To(c, "db-1", "198.18.0.11")
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("with RBACRules: %v", err)
			case tc.want == "":
				if n := logs.FilterMessage("primary routed").Len(); n != 2 {
					t.Fatalf("%d route changes logged, want 2: %v", n, logs.All())
				}
			case err == nil || !errors.Is(err, podrole.ErrForbidden) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "apply the RBAC in deploy/"):
				t.Fatalf("error %v, want ErrForbidden saying %q and the fix", err, tc.want)
			}
		})
	}
}
