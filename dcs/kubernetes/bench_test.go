package kubernetes_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/dcstest"
	k8sdcs "github.com/mysqlha/mysqlha/dcs/kubernetes"
	"github.com/mysqlha/mysqlha/testenv/kubetest"
)

// Benchmarks against a real kube-apiserver (make bench). They share one
// server; SteadyState3Members and Clusters100x3 run for a fixed time and
// ignore b.N (their ns/op is the run's length).

const benchNS = "bench"

func BenchmarkKubernetes(b *testing.B) {
	api := kubetest.Start(b)
	api.CreateNamespace(b, benchNS)
	b.Run("Renew", func(b *testing.B) { benchRenew(b, api) })
	b.Run("AcquireAfterExpiry", func(b *testing.B) { benchAcquireAfterExpiry(b, api) })
	b.Run("SteadyState3Members", func(b *testing.B) { benchSteadyState(b, api) })
	b.Run("Clusters100x3", func(b *testing.B) { benchClusters(b, api, 100, 3) })
}

// countingTransport counts the HTTP requests a client sends.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func countingConfig(api *kubetest.APIServer, n *atomic.Int64) *rest.Config {
	cfg := api.Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, n} }
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

func benchStore(b *testing.B, cfg *rest.Config, cluster, member string, clk *clocktesting.FakeClock) *k8sdcs.Store {
	opts := k8sdcs.Options{Leases: clientset(b, cfg).CoordinationV1().Leases(benchNS), Namespace: benchNS, Cluster: cluster, Member: member}
	if clk != nil {
		opts.Clock = clk
	}
	s, err := k8sdcs.New(opts)
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

func benchRenew(b *testing.B, api *kubetest.APIServer) {
	s := benchStore(b, api.Config(), newCluster(), "m0", nil)
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

// benchAcquireAfterExpiry times AcquireLeader by a member that has observed
// the holder's record unchanged for ttl (its fake clock is stepped), the
// holder alternating between two members.
func benchAcquireAfterExpiry(b *testing.B, api *kubetest.APIServer) {
	cluster := newCluster()
	clocks := []*clocktesting.FakeClock{fakeClock(), fakeClock()}
	stores := []*k8sdcs.Store{benchStore(b, api.Config(), cluster, "m0", clocks[0]), benchStore(b, api.Config(), cluster, "m1", clocks[1])}
	ctx := context.Background()
	if err := stores[0].AcquireLeader(ctx, dcs.DefaultTTL); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		holder, next := stores[i%2], stores[(i+1)%2]
		hc, err := holder.Cluster(ctx)
		if err != nil || hc.Leader == nil {
			b.Fatalf("holder's snapshot: %v %v", hc, err)
		}
		for {
			c, err := next.Cluster(ctx)
			if err == nil && c.Leader != nil && c.Leader.Version == hc.Leader.Version {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		clocks[(i+1)%2].Step(dcs.DefaultTTL)
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

// scrapeRequests returns apiserver_request_total summed over all labels.
func scrapeRequests(b *testing.B, api *kubetest.APIServer) float64 {
	raw, err := clientset(b, api.Config()).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// simulate runs clusters×members simulated agents (loop_wait 1 s, ttl 5 s)
// for warmup, then measures for window. It returns the renew latencies,
// the client-side request count per member in the window, and the API
// server's request rate.
func simulate(b *testing.B, api *kubetest.APIServer, clusters, members int, warmup, window time.Duration) ([]time.Duration, []int64, float64, *dcstest.Sim) {
	sim := &dcstest.Sim{LoopWait: time.Second, RetryTimeout: time.Second, TTL: dcs.DefaultTTL}
	counters := make([]atomic.Int64, clusters*members)
	var stores []*k8sdcs.Store
	for c := 0; c < clusters; c++ {
		cluster := newCluster()
		for m := 0; m < members; m++ {
			stores = append(stores, benchStore(b, countingConfig(api, &counters[len(stores)]), cluster, fmt.Sprintf("m%d", m), nil))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); sim.Run(ctx, s) }()
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(warmup)
	sim.Reset()
	before := make([]int64, len(stores))
	for i := range counters {
		before[i] = counters[i].Load()
	}
	apiBefore := scrapeRequests(b, api)
	start := time.Now()
	b.ResetTimer()
	time.Sleep(window)
	b.StopTimer()
	elapsed := time.Since(start)
	apiRate := (scrapeRequests(b, api) - apiBefore - 1) / elapsed.Seconds() // minus our own first scrape
	reqs := make([]int64, len(stores))
	for i := range counters {
		reqs[i] = counters[i].Load() - before[i]
	}
	// Every cluster must have exactly one leader, seen alike by its members.
	for c := 0; c < clusters; c++ {
		holders := map[string]bool{}
		for m := 0; m < members; m++ {
			snap, err := stores[c*members+m].Cluster(context.Background())
			if err != nil || snap.Leader == nil || snap.Leader.Expired {
				b.Fatalf("cluster %d member %d sees no valid leader: %v %v", c, m, snap, err)
			}
			holders[snap.Leader.Holder] = true
		}
		if len(holders) != 1 {
			b.Fatalf("cluster %d: members disagree on the leader: %v", c, holders)
		}
	}
	return sim.Renews(), reqs, apiRate, sim
}

// logErrors logs the errors of the measured window and reports their count.
func logErrors(b *testing.B, sim *dcstest.Sim) {
	total := 0
	for e, n := range sim.Errors() {
		b.Logf("%d× %s", n, e)
		total += n
	}
	b.ReportMetric(float64(total), "errors")
}

// benchSteadyState: one 3-member cluster with loop_wait 1 s; DCS requests
// per second per member, as sent by the clients (a watch counts once, when
// it is opened).
func benchSteadyState(b *testing.B, api *kubetest.APIServer) {
	const window = 30 * time.Second // three member refresh periods
	renews, reqs, _, sim := simulate(b, api, 1, 3, 3*time.Second, window)
	logErrors(b, sim)
	var total int64
	var leader int64
	for _, n := range reqs {
		total += n
		leader = max(leader, n)
	}
	b.ReportMetric(float64(total)/window.Seconds()/float64(len(reqs)), "req/s/member")
	b.ReportMetric(float64(leader)/window.Seconds(), "leader-req/s")
	b.ReportMetric(float64(total-leader)/window.Seconds()/float64(len(reqs)-1), "replica-req/s")
	report(b, "renew-", renews)
}

// benchClusters: many clusters of simulated members on one API server:
// renew latency under that load and the API server's request rate.
func benchClusters(b *testing.B, api *kubetest.APIServer, clusters, members int) {
	const window = 20 * time.Second
	renews, reqs, apiRate, sim := simulate(b, api, clusters, members, 5*time.Second, window)
	logErrors(b, sim)
	var total int64
	for _, n := range reqs {
		total += n
	}
	report(b, "renew-", renews)
	b.ReportMetric(float64(len(renews)), "renews")
	b.ReportMetric(apiRate, "apiserver-req/s")
	b.ReportMetric(float64(total)/window.Seconds(), "client-req/s")
}
