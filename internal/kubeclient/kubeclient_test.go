package kubeclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/mysqlha/mysqlha/internal/kubeclient"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// TestAgainstAPIServer: every call the agent makes, on a real kube-apiserver.
func TestAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	api := kubetest.Start(t)
	api.CreateNamespace(t, "db")
	c, err := kubeclient.New(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	leases := c.Leases("db")
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "demo-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("db1")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*coordinationv1.Lease).Name != "demo-leader" {
		t.Fatalf("watch event %v %T", ev.Type, ev.Object)
	}
	l.Spec.HolderIdentity = ptr.To("db2")
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A stale resourceVersion is a conflict, as the lock's compare-and-set needs.
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update on a stale version: %v, want a conflict", err)
	}
	got, err := leases.Get(ctx, "demo-leader", metav1.GetOptions{})
	if err != nil || *got.Spec.HolderIdentity != "db2" {
		t.Fatalf("get: %v %v", got, err)
	}
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := leases.Delete(ctx, "demo-leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "demo-leader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want not found", err)
	}

	admin := api.Client(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-0", Namespace: "db"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "mariadb"}}}}
	if _, err := admin.CoreV1().Pods("db").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"role": "primary"}}})
	if _, err := c.Pods("db").Patch(ctx, "demo-0", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "mysqlha"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pods("db").Get(ctx, "demo-0", metav1.GetOptions{})
	if err != nil || p.Labels["role"] != "primary" {
		t.Fatalf("pod after the patch: %v %v", p.Labels, err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-0."}, Reason: "Promoted", Message: "m",
		Type: corev1.EventTypeNormal, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "db", Name: "demo-0", UID: p.UID}}
	if _, err := c.Events("db").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs, err := admin.CoreV1().Events("db").List(ctx, metav1.ListOptions{})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].Reason != "Promoted" {
		t.Fatalf("events: %v %v", evs, err)
	}

	// The primary Service's EndpointSlice: created, read, updated.
	slices := c.EndpointSlices("db")
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "demo-primary",
		Labels: map[string]string{discoveryv1.LabelServiceName: "demo-primary"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.10"}}}}
	if sl, err = slices.Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[0].Addresses = []string{"198.18.0.11"}
	if _, err := slices.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := slices.Update(ctx, sl, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("slice update on a stale version: %v, want a conflict", err)
	}
	if got, err := slices.Get(ctx, "demo-primary", metav1.GetOptions{}); err != nil || got.Endpoints[0].Addresses[0] != "198.18.0.11" {
		t.Fatalf("slice after the update: %+v %v", got, err)
	}

	// Errors keep their API status, which the callers map (403, 404, 409).
	unpriv, err := kubeclient.New(api.UnprivilegedConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unpriv.Leases("db").Get(ctx, "x", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("unprivileged get: %v, want forbidden", err)
	}
	var status apierrors.APIStatus
	if _, err := c.Pods("db").Get(ctx, "", metav1.GetOptions{}); err == nil || errors.As(err, &status) {
		t.Fatalf("a pod with no name: %v, want a client-side error", err)
	}
}

// TestAgentLinksNoClientset: the agent binary must not import client-go's
// clientset, whose scheme registers every API group (47 MB of RSS idle),
// nor agentctl's command line (cli-runtime, which links the clientset's
// printers and kustomize).
func TestAgentLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/mysqlha/mysqlha/cmd/agent").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "k8s.io/client-go/kubernetes/scheme" || pkg == "k8s.io/client-go/kubernetes" {
			t.Errorf("cmd/agent depends on %s: use internal/kubeclient", pkg)
		}
		if strings.HasPrefix(pkg, "k8s.io/cli-runtime/") || pkg == "github.com/spf13/cobra" {
			t.Errorf("cmd/agent depends on %s, agentctl's command line", pkg)
		}
	}
}
