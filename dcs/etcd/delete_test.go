package etcd_test

import (
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

// TestDeleteMemberByLease: on etcd a member record is live while the
// session lease it is bound to exists, whatever it says. A record bound to
// a lease nobody keeps alive any more is refused until etcd drops the lease
// (and the record with it); a record bound to no lease, or whose content is
// garbage, is deleted.
func TestDeleteMemberByLease(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	cluster := newCluster()
	s := newStore(t, cli, cluster, "m0", fakeClock())
	key := func(m string) string { return "/mysqlha/" + cluster + "/members/" + m }

	grant, err := cli.Grant(ctx5(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, key("leased"), `{"name":"leased","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`, clientv3.WithLease(grant.ID))
	put(t, cli, key("unleased"), `{"name":"unleased","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`)
	put(t, cli, key("garbage"), "\x00 not json")
	waitCluster(t, s, "both readable records", func(c *dcs.Cluster) bool { return len(c.Members) == 2 && len(c.Problems) == 1 })

	err = s.DeleteMember(ctx5(t), "leased")
	if !errors.Is(err, dcs.ErrLive) || !strings.Contains(err.Error(), "session lease") {
		t.Fatalf("delete of a record bound to a live lease: %v, want ErrLive naming the lease", err)
	}
	for _, m := range []string{"unleased", "garbage"} {
		if err := s.DeleteMember(ctx5(t), m); err != nil {
			t.Fatalf("delete of the %s record: %v", m, err)
		}
	}
	c := waitCluster(t, s, "only the leased record left", func(c *dcs.Cluster) bool { return len(c.Members) == 1 && len(c.Problems) == 0 })
	if c.Members[0].Name != "leased" {
		t.Fatalf("members left: %+v", c.Members)
	}
	resp, err := cli.Get(ctx5(t), key(""), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("member keys in etcd: %v, %v; want the leased one only", resp, err)
	}

	// Its session ends: etcd takes the record with it.
	if _, err := cli.Revoke(ctx5(t), grant.ID); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, s, "the leased record gone with its lease", func(c *dcs.Cluster) bool { return len(c.Members) == 0 })
	if err := s.DeleteMember(ctx5(t), "leased"); !errors.Is(err, dcs.ErrNotFound) {
		t.Fatalf("delete after the lease went: %v, want ErrNotFound", err)
	}
}
