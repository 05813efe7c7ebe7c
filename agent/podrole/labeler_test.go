package podrole

// Quick logic tests without an API server: patch bodies, validation, the
// skip-unchanged rule and the Event queue's non-blocking behaviour. The
// behaviour against a real kube-apiserver is proven in apiserver_test.go.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestLabelValue(t *testing.T) {
	for _, tc := range []struct {
		role      dcs.Role
		value     string
		ok        bool
		logAsName string
	}{
		{dcs.RoleUnknown, "", true, "none"},
		{dcs.RolePrimary, "primary", true, "primary"},
		{dcs.RoleReplica, "replica", true, "replica"},
		{dcs.Role(7), "", false, "Role(7)"},
	} {
		if v, ok := labelValue(tc.role); v != tc.value || ok != tc.ok {
			t.Errorf("labelValue(%d) = %q, %v; want %q, %v", tc.role, v, ok, tc.value, tc.ok)
		}
		if got := roleName(tc.role); got != tc.logAsName {
			t.Errorf("roleName(%d) = %q, want %q", tc.role, got, tc.logAsName)
		}
	}
}

func TestSetRolePatchBody(t *testing.T) {
	keys := LabelKeys{}.withDefaults()
	for _, tc := range []struct {
		role dcs.Role
		want string
	}{
		{dcs.RolePrimary, `{"metadata":{"labels":{"mysqlha.io/cluster":"c1","mysqlha.io/role":"primary"}}}`},
		{dcs.RoleReplica, `{"metadata":{"labels":{"mysqlha.io/cluster":"c1","mysqlha.io/role":"replica"}}}`},
		// null deletes the key in a JSON merge patch.
		{dcs.RoleUnknown, `{"metadata":{"labels":{"mysqlha.io/cluster":"c1","mysqlha.io/role":null}}}`},
	} {
		value, _ := labelValue(tc.role)
		got, err := setRolePatch(keys, "c1", value)
		if err != nil || string(got) != tc.want {
			t.Errorf("setRolePatch(%s) = %s, %v; want %s", tc.role, got, err, tc.want)
		}
	}
}

func TestRemovePrimaryPatchBody(t *testing.T) {
	got, err := removePrimaryPatch(LabelKeys{Role: "example.com/role~x"}.withDefaults())
	// "/" and "~" in the key must be escaped (RFC 6901), or the path would
	// point into a nonexistent "example.com" object.
	want := `[{"op":"test","path":"/metadata/labels/example.com~1role~0x","value":"primary"},` +
		`{"op":"remove","path":"/metadata/labels/example.com~1role~0x"}]`
	if err != nil || string(got) != want {
		t.Errorf("removePrimaryPatch = %s, %v; want %s", got, err, want)
	}
}

func TestLabelKeysValidate(t *testing.T) {
	for _, tc := range []struct {
		keys    LabelKeys
		wantErr string // "" = valid
	}{
		{LabelKeys{}, ""},
		{LabelKeys{Cluster: "app.kubernetes.io/instance", Role: "role"}, ""},
		{LabelKeys{Cluster: "bad key"}, `invalid cluster label key "bad key"`},
		{LabelKeys{Role: "a/b/c"}, `invalid role label key "a/b/c"`},
		{LabelKeys{Role: "-role"}, `invalid role label key "-role"`},
		{LabelKeys{Role: "Example.com/role"}, `invalid role label key "Example.com/role"`},
		{LabelKeys{Cluster: "x/role", Role: "x/role"}, `both "x/role"`},
		{LabelKeys{Cluster: DefaultRoleLabel}, `both "mysqlha.io/role"`},
	} {
		err := tc.keys.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tc.keys, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%+v: error %v, want it to contain %q", tc.keys, err, tc.wantErr)
		}
	}
}

func TestNewLabelerRejectsBadConfig(t *testing.T) {
	c := clientOf(fake.NewClientset(), "ns")
	for _, tc := range []struct {
		name      string
		client    Client
		namespace string
		keys      LabelKeys
		reporter  string
		wantErr   string
	}{
		{"nil client", Client{}, "ns", LabelKeys{}, "db-0", "nil pod or event client"},
		{"bad namespace", c, "Bad_NS", LabelKeys{}, "db-0", `invalid namespace "Bad_NS"`},
		{"empty namespace", c, "", LabelKeys{}, "db-0", `invalid namespace ""`},
		{"bad key", c, "ns", LabelKeys{Role: "no spaces"}, "db-0", `invalid role label key "no spaces"`},
		{"empty reporter", c, "ns", LabelKeys{}, "", "reporter"},
		{"long reporter", c, "ns", LabelKeys{}, strings.Repeat("x", 129), "reporter"},
	} {
		l, err := NewLabeler(tc.client, tc.namespace, tc.keys, tc.reporter, zap.NewNop())
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: NewLabeler error %v, want it to contain %q", tc.name, err, tc.wantErr)
		}
		if l != nil {
			t.Errorf("%s: got a Labeler with an error", tc.name)
		}
	}
}

func newFakeLabeler(t *testing.T, objs ...*corev1.Pod) (*Labeler, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	for _, p := range objs {
		if err := cs.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	l, err := NewLabeler(clientOf(cs, "ns"), "ns", LabelKeys{}, "db-0", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	cs.ClearActions()
	return l, cs
}

func countActions(cs *fake.Clientset, verb string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func TestSetRoleWritesOnlyOnChange(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "ns"}}
	l, cs := newFakeLabeler(t, pod)
	steps := []struct {
		role       dcs.Role
		wantPatchs int // cumulative
	}{
		{dcs.RolePrimary, 1}, {dcs.RolePrimary, 1}, {dcs.RoleReplica, 2}, {dcs.RoleReplica, 2},
		{dcs.RoleUnknown, 3}, {dcs.RoleUnknown, 3}, {dcs.RolePrimary, 4},
	}
	for i, s := range steps {
		if err := l.SetRole(ctx, "db-0", "c1", s.role); err != nil {
			t.Fatalf("step %d SetRole(%s): %v", i, s.role, err)
		}
		if got := countActions(cs, "patch"); got != s.wantPatchs {
			t.Fatalf("step %d SetRole(%s): %d patches in total, want %d", i, s.role, got, s.wantPatchs)
		}
	}
	// A different cluster label is a change too.
	if err := l.SetRole(ctx, "db-0", "c2", dcs.RolePrimary); err != nil || countActions(cs, "patch") != 5 {
		t.Fatalf("SetRole with a new cluster: err %v, %d patches, want 5", err, countActions(cs, "patch"))
	}
}

func TestInvalidInputMakesNoRequest(t *testing.T) {
	ctx := context.Background()
	l, cs := newFakeLabeler(t)
	for _, tc := range []struct {
		name    string
		err     error
		wantErr string
	}{
		{"uppercase pod", l.SetRole(ctx, "DB-0", "c1", dcs.RolePrimary), `labelling pod DB-0 as primary: invalid pod name "DB-0"`},
		{"empty pod", l.SetRole(ctx, "", "c1", dcs.RolePrimary), `invalid pod name ""`},
		{"slash pod", l.SetRole(ctx, "../db-0", "c1", dcs.RoleReplica), `invalid pod name "../db-0"`},
		{"long pod", l.SetRole(ctx, strings.Repeat("a", 254), "c1", dcs.RoleReplica), "invalid pod name"},
		{"empty cluster", l.SetRole(ctx, "db-0", "", dcs.RolePrimary), "empty cluster name"},
		{"bad cluster", l.SetRole(ctx, "db-0", "a b", dcs.RolePrimary), `cluster name "a b" is not a valid label value`},
		{"bad role", l.SetRole(ctx, "db-0", "c1", dcs.Role(9)), "unknown role Role(9)"},
		{"remove bad pod", l.RemovePrimary(ctx, "db_0"), `removing primary label of pod db_0: invalid pod name "db_0"`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, tc.err, tc.wantErr)
		}
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("invalid input made %d API requests, want 0: %v", n, cs.Actions())
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
	got := truncate(strings.Repeat("é", 10), 10) // 20 bytes, 2 each
	if got != "ééé..." || len(got) > 10 {
		t.Errorf("truncate(é×10, 10) = %q, want a cut on a rune boundary", got)
	}
}

// hangingClient returns a clientset whose API server accepts connections but
// never answers until the request is cancelled: an unreachable API server
// from the Event writer's point of view.
// clientOf is the Labeler's client from a clientset (a fake one, here).
func clientOf(cs kubernetes.Interface, ns string) Client {
	return Client{Pods: cs.CoreV1().Pods(ns), Events: cs.CoreV1().Events(ns)}
}

func hangingClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestEventNeverBlocksAndCloseIsBounded(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	s := defaultSettings()
	s.eventTimeout = 10 * time.Second // longer than closeTimeout: Close must abort it
	s.closeTimeout = 200 * time.Millisecond
	s.queueSize = 1
	l, err := newLabeler(clientOf(hangingClient(t), "ns"), "ns", LabelKeys{}, "db-0", zap.New(core), s)
	if err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	// The first is taken by the writer (and hangs), the second waits in the
	// queue, the rest find it full. None may block.
	for i := 0; i < 5; i++ {
		l.Event(context.Background(), "db-0", EventTypeWarning, ReasonLeaderLost, "api server gone")
		if i == 0 {
			waitFor(t, func() bool { return len(l.queue) == 0 }) // writer took it
		}
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("Event blocked for %v against a hanging API server", d)
	}
	if n := logs.FilterMessage("event dropped").FilterField(zap.String("cause", "queue full")).Len(); n != 3 {
		t.Errorf("%d Events dropped for a full queue, want 3", n)
	}

	begin = time.Now()
	l.Close()
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("Close took %v, want about closeTimeout (200ms)", d)
	}
	select {
	case <-l.done:
	default:
		t.Fatal("the Event writer is still running after Close")
	}
	if n := logs.FilterMessage("event not recorded").Len(); n != 1 {
		t.Errorf("%d aborted writes logged, want 1", n)
	}
	if n := logs.FilterField(zap.String("cause", "labeler closed before it was written")).Len(); n != 1 {
		t.Errorf("%d queued Events dropped at Close, want 1", n)
	}

	l.Close() // idempotent
	l.Event(context.Background(), "db-0", EventTypeNormal, ReasonDemoted, "after close")
	if n := logs.FilterField(zap.String("cause", "labeler closed")).Len(); n != 1 {
		t.Errorf("Event after Close: %d drops logged, want 1", n)
	}
}

func TestEventRejectsBadInput(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	cs := fake.NewClientset()
	l, err := NewLabeler(clientOf(cs, "ns"), "ns", LabelKeys{}, "db-0", zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Event(ctx, "Bad_Pod", EventTypeNormal, ReasonPromoted, "m")
	l.Event(ctx, "db-0", "Info", ReasonPromoted, "m")
	l.Event(ctx, "db-0", EventTypeNormal, "", "m")
	l.Event(ctx, "db-0", EventTypeNormal, strings.Repeat("R", 129), "m")
	l.Close()
	if n := logs.FilterMessage("event dropped").FilterLevelExact(zap.ErrorLevel).Len(); n != 4 {
		t.Errorf("%d bad Events logged as errors, want 4: %v", n, logs.All())
	}
	if n := countActions(cs, "create"); n != 0 {
		t.Errorf("bad Events made %d creates, want 0", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
