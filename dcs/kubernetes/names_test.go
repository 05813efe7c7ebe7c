package kubernetes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/dcs"
	k8sdcs "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// ClusterNames finds each cluster with a Lease in the namespace, once, by
// its label, and not a Lease someone else manages nor another namespace's.
func TestClusterNames(t *testing.T) {
	api := kubetest.Start(t)
	api.CreateNamespace(t, "names")
	api.CreateNamespace(t, "elsewhere")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := api.Config()
	for _, c := range []string{"orders", "demo"} {
		s := newStore(t, cfg, "names", c, "db1", fakeClock())
		if err := s.UpdateMember(ctx, dcs.Member{Role: dcs.RoleReplica}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateMember(ctx, dcs.Member{Role: dcs.RolePrimary}); err != nil {
			t.Fatal(err)
		}
	}
	second := newStore(t, cfg, "names", "orders", "db2", fakeClock())
	if err := second.UpdateMember(ctx, dcs.Member{Role: dcs.RoleReplica}); err != nil {
		t.Fatal(err)
	}
	if err := newStore(t, cfg, "elsewhere", "billing", "db1", fakeClock()).UpdateMember(ctx, dcs.Member{Role: dcs.RoleReplica}); err != nil {
		t.Fatal(err)
	}
	leases := clientset(t, cfg).CoordinationV1().Leases("names")
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "not-ours",
		Labels: map[string]string{k8sdcs.DefaultClusterLabel: "impostor"}}}
	if _, err := leases.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := k8sdcs.ClusterNames(ctx, leases)
	if err != nil || !slices.Equal(got, []string{"demo", "orders"}) {
		t.Fatalf("ClusterNames = %v, %v; want [demo orders]", got, err)
	}
}
