package etcd_test

import (
	"slices"
	"testing"

	dcsetcd "github.com/mysqlha/mysqlha/dcs/etcd"
	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

// ClusterNames finds each cluster with keys under the prefix, once, and
// nothing of another prefix or of keys outside a cluster's folder.
func TestClusterNames(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	put(t, cli, "/mysqlha/orders/leader", "x")
	put(t, cli, "/mysqlha/orders/members/db1", "x")
	put(t, cli, "/mysqlha/demo/config", "x")
	put(t, cli, "/mysqlha/stray", "x")
	put(t, cli, "/other/billing/config", "x")
	put(t, cli, "/mysqlhaX/nope/config", "x")
	got, err := dcsetcd.ClusterNames(ctx5(t), cli, "")
	if err != nil || !slices.Equal(got, []string{"demo", "orders"}) {
		t.Fatalf("ClusterNames = %v, %v; want [demo orders]", got, err)
	}
	got, err = dcsetcd.ClusterNames(ctx5(t), cli, "/other")
	if err != nil || !slices.Equal(got, []string{"billing"}) {
		t.Fatalf("ClusterNames(/other) = %v, %v; want [billing]", got, err)
	}
}
