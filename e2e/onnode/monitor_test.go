package onnode

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersdiscoveryv1 "k8s.io/client-go/listers/discovery/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/realnode"
)

// rootPassword is the local-node overlay's published test password.
const rootPassword = "test-only-root-password"

var members = []string{clusterName + "-0", clusterName + "-1", clusterName + "-2"}

// views are watch-fed caches of the pods and the primary Service's
// EndpointSlices: the monitor reads them every 50 ms without asking the API
// server, and they keep their last state while it is down.
type views struct {
	pods   listerscorev1.PodNamespaceLister
	slices listersdiscoveryv1.EndpointSliceNamespaceLister
}

func (c *cluster) views() *views {
	c.viewsOnce.Do(func() {
		f := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(namespace))
		v := &views{pods: f.Core().V1().Pods().Lister().Pods(namespace),
			slices: f.Discovery().V1().EndpointSlices().Lister().EndpointSlices(namespace)}
		f.Start(make(chan struct{})) // for the life of the test binary
		f.WaitForCacheSync(make(chan struct{}))
		c.v = v
	})
	return c.v
}

// routed returns the ready addresses of the primary Service.
func (v *views) routed() []string {
	l, _ := v.slices.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: clusterName + "-primary"}))
	var out []string
	for _, s := range l {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out
}

// monitor samples every member every checker.Tick: read_only through the
// server's own socket (reached from the host through /proc/<pid>/root, so
// that no network fault hides a writable server), TCP reachability of the
// pod's network, the role label and the primary Service's endpoints.
type monitor struct {
	v    *views
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	samples []checker.Sample
	// views: every Tick, who is routed and labelled primary, from one read
	// of the watch caches (checker.RoutingView).
	views []checker.RoutingView
	// routing is each change of the primary Service's ready members and of
	// the pods' role labels and readiness, as the watch caches showed it:
	// the story behind two routed members, when the checker finds them.
	routing []string
}

func (c *cluster) startMonitor() *monitor {
	m := &monitor{v: c.views(), stop: make(chan struct{})}
	for _, name := range members {
		m.wg.Add(1)
		go m.watch(name)
	}
	m.wg.Add(1)
	go m.watchRouting()
	return m
}

// watchRouting records, every Tick, the routing state when it changed.
func (m *monitor) watchRouting() {
	defer m.wg.Done()
	start := time.Now()
	tick := time.NewTicker(checker.Tick)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		routed := m.v.routed()
		view := checker.RoutingView{At: time.Now()}
		var b strings.Builder
		for _, name := range members {
			p, err := m.v.pods.Get(name)
			if err != nil {
				fmt.Fprintf(&b, " %s:gone", name)
				continue
			}
			isRouted := p.Status.PodIP != "" && slices.Contains(routed, p.Status.PodIP)
			if isRouted {
				view.Routed = append(view.Routed, name)
			}
			if p.Labels[roleLabel] == "primary" && p.DeletionTimestamp == nil {
				view.Labelled = append(view.Labelled, name)
			}
			fmt.Fprintf(&b, " %s:label=%q,ready=%v,routed=%v", name, p.Labels[roleLabel], podReady(*p), isRouted)
		}
		state := b.String()
		m.mu.Lock()
		m.views = append(m.views, view)
		if state != last && len(m.routing) < 200 {
			m.routing = append(m.routing, fmt.Sprintf("+%s%s", time.Since(start).Round(time.Millisecond), state))
		}
		m.mu.Unlock()
		last = state
	}
}

// Routing is what watchRouting recorded.
func (m *monitor) Routing() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.routing)
}

func (m *monitor) watch(name string) {
	defer m.wg.Done()
	var sock socketConn
	defer sock.close()
	tick := time.NewTicker(checker.Tick)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		s := checker.Sample{At: time.Now(), Member: name}
		if p, err := m.v.pods.Get(name); err == nil {
			s.Labelled = p.Labels[roleLabel] == "primary" && p.DeletionTimestamp == nil
			s.Routed = p.Status.PodIP != "" && slices.Contains(m.v.routed(), p.Status.PodIP)
			// The answer held at some instant between the question and
			// the answer (checker.Sample.Asked).
			s.Asked = time.Now()
			s.Known, s.Writable = sock.writable(p)
			s.At = time.Now()
			s.Reachable = reachable(p.Status.PodIP)
		}
		m.mu.Lock()
		m.samples = append(m.samples, s)
		m.mu.Unlock()
	}
}

// Views is what watchRouting read, every Tick.
func (m *monitor) Views() []checker.RoutingView {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.views)
}

// Stop ends the sampling and returns the samples.
func (m *monitor) Stop() []checker.Sample {
	close(m.stop)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.samples)
}

// reachable: the pod's network answers a TCP connection to the agent's
// port, with a connection or a refusal (the agent may be down while the
// network is not). Not mysqld's port: it logs every connection that
// closes unauthenticated.
func reachable(ip string) bool {
	if ip == "" {
		return false
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "8008"), 100*time.Millisecond)
	if err == nil {
		c.Close()
	}
	return err == nil || errors.Is(err, syscall.ECONNREFUSED)
}

// socketConn is a root connection to one member's mysqld over its socket,
// remade when the server process changes.
type socketConn struct {
	pid int
	db  *sql.DB
}

func (s *socketConn) close() {
	if s.db != nil {
		s.db.Close()
	}
}

// writable asks read_only; known is false when the server does not answer
// within 300 ms (stopped, frozen, starting).
func (s *socketConn) writable(p *corev1.Pod) (known, writable bool) {
	pid, err := realnode.ContainerPIDOf(p, "mariadb")
	if err != nil {
		return false, false
	}
	if pid != s.pid {
		s.close()
		s.pid, s.db = pid, openSocket(pid, 300*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var ro int
	if err := s.db.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro); err != nil {
		return false, false
	}
	return true, ro == 0
}

// openSocket is a root pool on the socket of the mysqld with host PID pid.
func openSocket(pid int, timeout time.Duration) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net = "root", rootPassword, "unix"
	cfg.Addr = fmt.Sprintf("/proc/%d/root/run/mysqld/mysqld.sock", pid)
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = timeout, timeout, timeout
	conn, _ := mysql.NewConnector(cfg) // cannot fail: no DSN to parse
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(1)
	db.SetMaxOpenConns(1)
	return db
}
