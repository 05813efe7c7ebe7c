package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/dcstest"
	"github.com/mysqlha/mysqlha/dcs/etcd"
	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

// Benchmarks against a real embedded etcd (make bench). SteadyState3Members
// and ExpiryDetection run for a fixed time and ignore b.N.

func BenchmarkEtcd(b *testing.B) {
	srv := etcdtest.Start(b)
	b.Run("Renew", func(b *testing.B) { benchRenew(b, srv) })
	b.Run("AcquireAfterExpiry", func(b *testing.B) { benchAcquireAfterExpiry(b, srv) })
	b.Run("ExpiryDetection", func(b *testing.B) { benchExpiryDetection(b, srv) })
	b.Run("SteadyState3Members", func(b *testing.B) { benchSteadyState(b, srv) })
}

// countingClient counts the requests a client sends: unary calls and
// messages sent on streams (a watch's create request, each lease
// keep-alive).
func countingClient(b *testing.B, srv *etcdtest.Server, n *atomic.Int64) *clientv3.Client {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		n.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return countingStream{s, n}, nil
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: srv.Endpoints()[:1], Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli
}

type countingStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s countingStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

func benchStore(b *testing.B, cli *clientv3.Client, cluster, member string, clk *clocktesting.FakeClock) *etcd.Store {
	opts := etcd.Options{Client: cli, Cluster: cluster, Member: member}
	if clk != nil {
		opts.Clock = clk
	}
	s, err := etcd.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func report(b *testing.B, prefix string, lat []time.Duration) {
	b.ReportMetric(dcstest.Percentile(lat, 50), prefix+"p50-ms")
	b.ReportMetric(dcstest.Percentile(lat, 99), prefix+"p99-ms")
}

func benchRenew(b *testing.B, srv *etcdtest.Server) {
	s := benchStore(b, srv.Client(b), newCluster(), "m0", nil)
	ctx := context.Background()
	if err := s.AcquireLeader(ctx, dcs.DefaultTTL); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := s.RenewLeader(ctx, dcs.DefaultTTL); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	report(b, "", lat)
}

// benchAcquireAfterExpiry times AcquireLeader once the holder's lease is
// gone. The lease is revoked rather than left to expire (the server then
// deletes the key exactly as on expiry), so that an iteration does not
// wait a ttl; ExpiryDetection measures the expiry itself.
func benchAcquireAfterExpiry(b *testing.B, srv *etcdtest.Server) {
	cli := srv.Client(b)
	cluster := newCluster()
	stores := []*etcd.Store{benchStore(b, cli, cluster, "m0", nil), benchStore(b, cli, cluster, "m1", nil)}
	key := etcd.DefaultPrefix + "/" + cluster + "/leader"
	ctx := context.Background()
	if err := stores[0].AcquireLeader(ctx, dcs.DefaultTTL); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		next := stores[(i+1)%2]
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			b.Fatalf("leader key: %v %v", resp, err)
		}
		if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
			b.Fatal(err)
		}
		for {
			c, err := next.Cluster(ctx)
			if err == nil && c.Leader == nil {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		b.StartTimer()
		start := time.Now()
		if err := next.AcquireLeader(ctx, dcs.DefaultTTL); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	report(b, "", lat)
}

// benchExpiryDetection: how long after ttl a member sees an abandoned lock
// vanish (etcd checks lease expiry periodically, and the watch delivers the
// deletion). Each iteration abandons the lock of 20 clusters at once with a
// 1 s ttl; reports the delay beyond ttl, measured from when AcquireLeader
// returned (the lease began a little earlier).
func benchExpiryDetection(b *testing.B, srv *etcdtest.Server) {
	const clusters = 20
	cli := srv.Client(b)
	ttl := time.Duration(etcdtest.MinLeaseTTL) * time.Second
	var all []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		all = append(all, expiryRound(b, cli, clusters, ttl)...)
	}
	b.StopTimer()
	report(b, "beyond-ttl-", all)
}

func expiryRound(b *testing.B, cli *clientv3.Client, clusters int, ttl time.Duration) []time.Duration {
	delays := make([]time.Duration, clusters)
	var wg sync.WaitGroup
	for c := 0; c < clusters; c++ {
		cluster := newCluster()
		holder, observer := benchStore(b, cli, cluster, "m0", nil), benchStore(b, cli, cluster, "m1", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if err := holder.AcquireLeader(ctx, ttl); err != nil {
				b.Error(err)
				return
			}
			acquired := time.Now()
			seen := false
			for {
				select {
				case <-observer.Changes():
				case <-time.After(time.Millisecond):
				}
				snap, err := observer.Cluster(ctx)
				if err != nil {
					continue
				}
				if snap.Leader != nil {
					seen = true
				} else if seen {
					delays[c] = time.Since(acquired) - ttl
					return
				}
			}
		}()
	}
	wg.Wait()
	return delays
}

// benchSteadyState: one 3-member cluster with loop_wait 1 s, each member
// with its own client; DCS requests per second per member.
func benchSteadyState(b *testing.B, srv *etcdtest.Server) {
	const window = 30 * time.Second // three member refresh periods
	sim := &dcstest.Sim{LoopWait: time.Second, RetryTimeout: time.Second, TTL: dcs.DefaultTTL}
	cluster := newCluster()
	var counters [3]atomic.Int64
	var stores []*etcd.Store
	for m := range counters {
		stores = append(stores, benchStore(b, countingClient(b, srv, &counters[m]), cluster, fmt.Sprintf("m%d", m), nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); sim.Run(ctx, s) }()
	}
	time.Sleep(3 * time.Second)
	sim.Reset()
	var before [3]int64
	for i := range counters {
		before[i] = counters[i].Load()
	}
	b.ResetTimer()
	time.Sleep(window)
	b.StopTimer()
	cancel()
	wg.Wait()
	errs := 0
	for e, n := range sim.Errors() {
		b.Logf("%d× %s", n, e)
		errs += n
	}
	b.ReportMetric(float64(errs), "errors")
	var total, leader int64
	for i := range counters {
		n := counters[i].Load() - before[i]
		total += n
		leader = max(leader, n)
	}
	b.ReportMetric(float64(total)/window.Seconds()/3, "req/s/member")
	b.ReportMetric(float64(leader)/window.Seconds(), "leader-req/s")
	b.ReportMetric(float64(total-leader)/window.Seconds()/2, "replica-req/s")
	report(b, "renew-", sim.Renews())
}
