package demo

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

// embeddedEtcd is a single-member etcd v3 server running inside the demo
// process (go.etcd.io/etcd/server/v3/embed). It is the demo's DCS, and the
// kube-apiserver's storage in Kubernetes mode.
//
// dcs/etcd/etcdtest does the same for tests but needs a testing.TB; this is
// its minimal TB-free counterpart (fixed client port, state in the work dir).
type embeddedEtcd struct {
	etcd     *embed.Etcd
	grpc     []*grpc.Server
	mu       sync.Mutex
	endpoint string
	logFile  string
	stopOnce sync.Once
}

// startEtcd starts the member with its data and log under dir, serving
// clients on http://127.0.0.1:clientPort (a free port when 0), and waits
// until it has elected itself leader.
func startEtcd(dir string, clientPort int) (*embeddedEtcd, error) {
	peerPort, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	if clientPort == 0 {
		if clientPort, err = freePort("127.0.0.1"); err != nil {
			return nil, err
		}
	}
	client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}
	e := &embeddedEtcd{endpoint: client.String(), logFile: filepath.Join(dir, "etcd.log")}

	cfg := embed.NewConfig()
	cfg.Name = "mysqlha-demo"
	cfg.Dir = filepath.Join(dir, "data")
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{e.logFile}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.InitialClusterToken = "mysqlha-demo-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// The demo's state is thrown away at exit; fsync would only slow it.
	cfg.UnsafeNoFsync = true
	cfg.ServiceRegister = func(s *grpc.Server) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.grpc = append(e.grpc, s)
	}
	ee, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd (log %s): %w", e.logFile, err)
	}
	e.etcd = ee
	select {
	case <-ee.Server.ReadyNotify():
		return e, nil
	case err := <-ee.Err():
		e.Stop()
		return nil, fmt.Errorf("embedded etcd failed (log %s): %w", e.logFile, err)
	case <-time.After(30 * time.Second):
		e.Stop()
		return nil, fmt.Errorf("embedded etcd not ready after 30s (log %s)", e.logFile)
	}
}

// Endpoint is the client URL.
func (e *embeddedEtcd) Endpoint() string { return e.endpoint }

// Stop drops client connections at once (embed's graceful close would wait
// for open watch and keep-alive streams) and stops the member.
func (e *embeddedEtcd) Stop() {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		for _, s := range e.grpc {
			s.Stop()
		}
		e.mu.Unlock()
		e.etcd.Close()
	})
}

// freePort returns a TCP port on host that was free a moment ago.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("no free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree checks that host:port can be bound, so that a port in use fails
// with a message naming it rather than deep inside a child's log.
func portFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s:%d is in use (by another server?); choose other ports, e.g. make demo DEMO_FLAGS=\"--etcd-port=12379 --mysql-port=13307 --api-port=18008\": %w", host, port, err)
	}
	return l.Close()
}
