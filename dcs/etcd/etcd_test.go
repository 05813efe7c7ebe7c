package etcd_test

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/dcstest"
	"github.com/mysqlha/mysqlha/dcs/etcd"
	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

const (
	// ttl: etcdtest grants leases down to 1 s; 2 s leaves room for a slow
	// CI machine between a renew and the lease's expiry.
	ttl           = 2 * time.Second
	memberTTL     = 2 * time.Second
	memberRefresh = time.Second
)

var clusterSeq atomic.Int64

func newCluster() string { return fmt.Sprintf("c%d", clusterSeq.Add(1)) }

func newStore(t testing.TB, cli *clientv3.Client, cluster, member string, clk *clocktesting.FakeClock) *etcd.Store {
	t.Helper()
	s, err := etcd.New(etcd.Options{
		Client: cli, Cluster: cluster, Member: member, Clock: clk,
		MemberTTL: memberTTL, MemberRefresh: memberRefresh,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func fakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

// unreachableClient is a client for a loopback port nobody listens on.
func unreachableClient(t testing.TB) *clientv3.Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, Logger: zap.NewNop(), DialTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestContract(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	dcstest.Run(t, func(t *testing.T, n int) *dcstest.Env {
		cluster := newCluster()
		e := &dcstest.Env{TTL: ttl, MemberTTL: memberTTL, MemberRefresh: memberRefresh}
		var clocks []*clocktesting.FakeClock
		var clients []*clientv3.Client
		for i := 0; i < n; i++ {
			c := fakeClock()
			clocks = append(clocks, c)
			// A client of its own, so that Crash can cut one store off.
			clients = append(clients, srv.Client(t))
			e.Stores = append(e.Stores, newStore(t, clients[i], cluster, fmt.Sprintf("m%d", i), c))
		}
		// A killed agent's client vanishes: its session is no longer kept
		// alive, nor revoked.
		e.Crash = func(i int) {
			_ = clients[i].Close()
			_ = e.Stores[i].Close()
		}
		// The server's lease clock rules expiry: real time must pass. The
		// fake clocks only drive the member write rate and unleased keys.
		e.Advance = func(d time.Duration) {
			time.Sleep(d)
			for _, c := range clocks {
				c.Step(d)
			}
		}
		e.Twin = func(i int) dcs.Store {
			c := fakeClock()
			clocks = append(clocks, c)
			return newStore(t, cli, cluster, fmt.Sprintf("m%d", i), c)
		}
		e.Unreachable = func() dcs.Store { return newStore(t, unreachableClient(t), cluster, "unreachable", fakeClock()) }
		return e
	})
}
