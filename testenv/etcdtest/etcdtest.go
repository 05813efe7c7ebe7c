// Package etcdtest starts a real etcd v3 server, not a fake, and is used by
// both the tests and the demo. The server is a single member embedded in
// the calling process (go.etcd.io/etcd/server/v3/embed); the DCS tests and
// benchmarks, e2e, kubetest (as the apiserver's storage) and the demo's
// etcd all run on it. The name follows Go's httptest: a helper for tests,
// not a test double.
//
// Start and Launch guarantee that, when they return, the server has elected
// itself leader and serves the v3 gRPC API on http://127.0.0.1:<port> (a free
// port unless WithClientPort; plus any WithClientHost addresses). Start keeps
// its data in tb.TempDir() and stops the server by tb.Cleanup; Launch, for
// programs without a testing.TB, keeps it in the directory it is given and
// leaves stopping to the caller. Stop stops either earlier, e.g. to simulate a
// dead DCS.
//
// # Timing and the minimal lease TTL
//
// etcd refuses leases shorter than minTTL = ceil(1.5 × election timeout)
// seconds: a Grant with a smaller TTL is silently raised to minTTL (the
// granted TTL is in LeaseGrantResponse.TTL). With etcd's defaults (100 ms
// heartbeat, 1000 ms election timeout) that is 2 s. This package runs the
// server with a 50 ms heartbeat and a 500 ms election timeout, so a 1 s lease
// is granted as 1 s: 1 s is the minimal TTL that works here (a TTL of 0 or
// less is rejected by clientv3/etcd as usual). The single member never needs
// a real election after start-up, so the short timeouts cost nothing but a few
// more ticks per second.
//
// fsync is disabled (UnsafeNoFsync): the data only has to survive a graceful
// Stop, never a machine crash, and fsync dominates write latency on some disks.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

const (
	// readyTimeout bounds how long Launch waits for the member to become leader.
	readyTimeout = 20 * time.Second
	// Heartbeat and election timeout of the embedded member; see the package doc.
	tickMs     = 50
	electionMs = 500
	// MinLeaseTTL is the smallest lease TTL, in seconds, that the server grants
	// as requested (measured by TestMinimalLeaseTTL).
	MinLeaseTTL = 1
	// startAttempts: free ports are picked by binding :0 and closing, so another
	// process may grab one before etcd binds it; retry with new ports.
	startAttempts = 3
)

// Option configures Start and Launch.
type Option func(*options)

type options struct {
	clientPort  int
	clientHosts []string
	tls         *transport.TLSInfo
}

// WithClientPort makes the server serve loopback clients on
// http://127.0.0.1:port instead of a free port (0, the default); e.g. the
// demo's well-known 2379. Launch fails if the port is taken.
func WithClientPort(port int) Option {
	return func(o *options) { o.clientPort = port }
}

// WithClientHost makes the server also serve clients on host (an IP address
// assigned to this machine, e.g. a test bridge's 198.18.0.1), in addition to
// 127.0.0.1, so that processes in network namespaces can reach it. Each host
// gets its own free port; Endpoints lists them all.
func WithClientHost(host string) Option {
	return func(o *options) { o.clientHosts = append(o.clientHosts, host) }
}

// WithClientTLS serves clients over TLS (https endpoints) with the server
// certificate and key, and requires a client certificate signed by ca.
func WithClientTLS(cert, key, ca string) Option {
	return func(o *options) {
		o.tls = &transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca, ClientCertAuth: true}
	}
}

// Server is a running embedded etcd member.
type Server struct {
	etcd      *embed.Etcd
	grpc      *grpcServers
	endpoints []string
	logFile   string
	stopOnce  sync.Once
}

// grpcServers collects the member's gRPC servers (one per client URL) so that
// Stop can drop client connections at once. embed's own Close stops them
// gracefully, which waits up to its request timeout (about 6 s) for open
// watch and lease keep-alive streams; a dying DCS does not wait for anything.
type grpcServers struct {
	mu sync.Mutex
	ss []*grpc.Server
}

func (g *grpcServers) add(s *grpc.Server) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ss = append(g.ss, s)
}

func (g *grpcServers) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.ss {
		s.Stop()
	}
}

// Start starts an etcd member in tb.TempDir() (see Launch), failing tb if it
// is not ready within 20 s, and registers its shutdown with tb.Cleanup.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Launch(tb.TempDir(), opts...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Launch starts a new single-member cluster with its data in dir/data and
// its log in dir/etcd.log, and waits until it is leader (20 s at most). dir
// is created if missing; dir/data is Launch's own and emptied first, as the
// member is always a new one. The caller owns the server: Stop ends it, and
// dir is left in place.
func Launch(dir string, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	hosts := append([]string{"127.0.0.1"}, o.clientHosts...)
	for _, h := range hosts {
		if net.ParseIP(h) == nil {
			return nil, fmt.Errorf("etcdtest: client host %q is not an IP address", h)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}

	logFile := filepath.Join(dir, "etcd.log")
	dataDir := filepath.Join(dir, "data")
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("etcdtest: %w", err)
		}
		gs := &grpcServers{}
		e, err := start(dataDir, logFile, hosts, o, gs)
		if err == nil {
			s := &Server{etcd: e, grpc: gs, logFile: logFile}
			for _, u := range e.Config().AdvertiseClientUrls {
				s.endpoints = append(s.endpoints, u.String())
			}
			return s, nil
		}
		lastErr = err
		if !isAddrInUse(err) {
			break
		}
	}
	return nil, fmt.Errorf("etcdtest: starting embedded etcd on %v: %w", hosts, lastErr)
}

// start starts the member serving clients on hosts, hosts[0] on clientPort
// when it is not 0 and everything else on free ports.
func start(dir, logFile string, hosts []string, o options, gs *grpcServers) (*embed.Etcd, error) {
	scheme := "http"
	if o.tls != nil {
		scheme = "https"
	}
	peer, err := freeURL("127.0.0.1")
	if err != nil {
		return nil, err
	}
	var clients []url.URL
	for i, h := range hosts {
		if i == 0 && o.clientPort != 0 {
			clients = append(clients, url.URL{Scheme: scheme, Host: net.JoinHostPort(h, strconv.Itoa(o.clientPort))})
			continue
		}
		u, err := freeURL(h)
		if err != nil {
			return nil, err
		}
		u.Scheme = scheme
		clients = append(clients, u)
	}

	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	// Even at error level etcd logs every listener it closes on shutdown, so
	// the log goes to a file (see LogFile) rather than into test output.
	cfg.LogOutputs = []string{logFile}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.ListenClientUrls = clients
	cfg.AdvertiseClientUrls = clients
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.InitialClusterToken = "etcdtest-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.TickMs = tickMs
	cfg.ElectionMs = electionMs
	cfg.UnsafeNoFsync = true
	cfg.ServiceRegister = gs.add
	if o.tls != nil {
		cfg.ClientTLSInfo = *o.tls
	}
	// No metrics listener, no v2 store, no pprof: nothing the tests need.

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		gs.stop()
		e.Close()
		return nil, fmt.Errorf("etcd failed before becoming ready (log: %s): %w", logFile, err)
	case <-time.After(readyTimeout):
		gs.stop()
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready within %v (log: %s)", readyTimeout, logFile)
	}
}

// freeURL returns http://host:port with a port that was free a moment ago.
func freeURL(host string) (url.URL, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return url.URL{}, fmt.Errorf("no free port on %s (is the address assigned to an interface?): %w", host, err)
	}
	addr := l.Addr().String()
	l.Close()
	return url.URL{Scheme: "http", Host: addr}, nil
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// LogFile returns the path of the member's log (error level and above),
// dir/etcd.log of Launch; Start's lives in a tb.TempDir and is removed with it.
func (s *Server) LogFile() string { return s.logFile }

// Endpoints returns the client URLs ("http://127.0.0.1:port" first, then one
// per WithClientHost in order).
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Client returns a new client for Endpoints()[0] (loopback), closed by
// tb.Cleanup. Its logger is silent so that a deliberately stopped server does
// not flood the test output.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   s.endpoints[:1],
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("etcdtest: client for %v: %v", s.endpoints[:1], err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop shuts the server down and waits until it has stopped: clients then get
// connection errors as with a dead DCS. It is idempotent and also run by
// tb.Cleanup.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		// Drop client connections first (see grpcServers), then Close, which
		// is synchronous: it returns after the raft loop and all handler
		// goroutines have exited.
		s.grpc.stop()
		s.etcd.Close()
	})
}
