package e2e

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mysqlha/mysqlha/internal/apiauth"
	"github.com/mysqlha/mysqlha/testenv/etcdtest"
	"github.com/mysqlha/mysqlha/testenv/localproc"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// Timing is the cluster's timing, passed to every agent as its bootstrap
// flags. The zero value of a field means the shipped default.
type Timing struct {
	TTL, LoopWait, RetryTimeout, SafetyMargin time.Duration
}

// DefaultTiming mirrors dcs.DefaultConfig; the e2e tests pass it explicitly
// so that a change of the shipped defaults shows up here as a diff.
var DefaultTiming = Timing{TTL: 5 * time.Second, LoopWait: time.Second, RetryTimeout: time.Second, SafetyMargin: time.Second}

// Options shape a test cluster.
type Options struct {
	// Members is the number of members; 3 when zero.
	Members int
	Timing  Timing
	// AgentArgs are appended to every agent's command line, MySQLArgs to
	// every mysqld's.
	AgentArgs, MySQLArgs []string
	// WritableMySQLConfig starts mysqld writable. By default every mysqld
	// runs with read_only=ON in its configuration, as a production my.cnf
	// must: a mysqld that (re)starts before its agent would otherwise take
	// writes the cluster's primary never sees, and no agent can prevent that.
	WritableMySQLConfig bool
	// Kubernetes runs the agents with --dcs=kubernetes against the package's
	// shared kube-apiserver, one Pod per member (kube_test.go), instead of
	// --dcs=etcd against an etcd of the cluster's own.
	Kubernetes bool
	// MySQLProxies puts a Proxy (netproxy_test.go) in front of every
	// member's mysqld and has its agent advertise the proxy
	// (--advertise-mysql-addr) while it reaches its own server directly
	// (--mysql-local-addr): peers and replicas then connect through the
	// proxy, which a scenario can black-hole to cut the member off.
	MySQLProxies bool
	// DCSProxies puts a Proxy in front of etcd for each member's agent
	// (Member.DCSProxy), which a scenario can black-hole to cut that agent
	// off from the DCS alone.
	DCSProxies bool
}

// Cluster is one DCS (an etcd of its own, or a namespace of the shared
// kube-apiserver), n MariaDB servers and one agent process per server.
type Cluster struct {
	tb     testing.TB
	Name   string
	Timing Timing
	// Etcd is the DCS; nil in Kubernetes mode.
	Etcd *etcdtest.Server
	etcd *clientv3.Client
	// Kube is the cluster's Kubernetes objects; nil on etcd.
	Kube    *KubeEnv
	Members []*Member
	logDir  string
	http    *http.Client // sends the API token
	// apiTokenFile holds apiToken, every agent's --api-token-file.
	apiTokenFile string
	// bin and agentArgs are every agent's binary and extra flags; proxies
	// is Options.MySQLProxies, dcsProxies Options.DCSProxies.
	bin        string
	agentArgs  []string
	proxies    bool
	dcsProxies bool
}

// Member is one MariaDB server and the agent that manages it.
type Member struct {
	c      *Cluster
	Index  int
	Name   string
	Server *mysqltest.Server
	// APIURL is the agent's HTTP API.
	APIURL  string
	LogPath string
	args    []string
	// Proxy stands in front of mysqld when Options.MySQLProxies is set;
	// mysqlAddr is the address the agent advertises to peers and replicas.
	Proxy     *Proxy
	mysqlAddr string
	// DCSProxy stands between the agent and etcd with Options.DCSProxies.
	DCSProxy *Proxy

	root *sql.DB // root over the socket: checks only, never writes
	app  *sql.DB // the application user over TCP: the writes under test

	mu     sync.Mutex
	agent  *localproc.Process // nil when the agent does not run
	frozen bool
	starts int
}

// NewCluster starts etcd, the servers and the agents, and registers their
// shutdown. It does not wait for a primary: see WaitHealthy.
func NewCluster(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("e2e: starts real MariaDB, etcd and agents; skipped with -short")
	}
	bin := buildAgent(tb)
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Timing == (Timing{}) {
		o.Timing = DefaultTiming
	}
	c := &Cluster{tb: tb, Name: clusterName(tb.Name()), Timing: o.Timing,
		http: &http.Client{Timeout: 500 * time.Millisecond, Transport: apiauth.Transport(nil, apiToken)},
		bin:  bin, agentArgs: o.AgentArgs, proxies: o.MySQLProxies, dcsProxies: o.DCSProxies}
	c.apiTokenFile = filepath.Join(tb.TempDir(), "api-token")
	if err := os.WriteFile(c.apiTokenFile, []byte(apiToken+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	c.logDir = tb.TempDir()
	if *flagLogDir != "" {
		c.logDir = filepath.Join(*flagLogDir, c.Name)
		if err := os.MkdirAll(c.logDir, 0o755); err != nil {
			tb.Fatal(err)
		}
	}

	if o.Kubernetes {
		c.Kube = newKubeEnv(tb, c.Name, tb.TempDir())
	} else {
		c.Etcd = etcdtest.Start(tb)
		c.etcd = c.Etcd.Client(tb)
	}
	mo := mysqltest.Options{ExtraArgs: o.MySQLArgs}
	if !o.WritableMySQLConfig {
		mo.ExtraArgs = append(mo.ExtraArgs, "--read-only=ON")
	}
	servers := mysqltest.Start(tb, o.Members, mo)

	// Printed before the servers and the log directory are removed
	// (cleanups run last-registered first) and after the agents are gone.
	tb.Cleanup(func() {
		c.checkLogKeys()
		if tb.Failed() {
			c.dumpLogs()
		}
	})
	for i, s := range servers {
		if c.Kube != nil {
			c.Kube.createPod(tb, s.Name, fmt.Sprintf("198.18.0.%d", 11+i))
		}
		c.Members = append(c.Members, c.newMember(i, s, s.Name, s.Name))
	}
	for _, m := range c.Members {
		tb.Cleanup(m.cleanup)
		m.StartAgent()
	}
	return c
}

// newMember prepares the member of server s, whose agent runs with
// --name=agentName and logs to <logName>.log; it starts nothing but the
// member's proxy (Options.MySQLProxies). The harness's name of the member is
// the server's: a scenario may start an agent under the name of another
// member (duplicate_identity_test.go).
func (c *Cluster) newMember(index int, s *mysqltest.Server, agentName, logName string) *Member {
	tb := c.tb
	tb.Helper()
	m := &Member{c: c, Index: index, Name: s.Name, Server: s, LogPath: filepath.Join(c.logDir, logName+".log"), mysqlAddr: s.Addr()}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	m.APIURL = "http://" + listen
	if c.proxies {
		m.Proxy = StartProxy(tb, s.Addr())
		m.mysqlAddr = m.Proxy.Addr()
	}
	dcsArgs := c.dcsArgs()
	if c.dcsProxies && c.Etcd != nil {
		m.DCSProxy = StartProxy(tb, strings.TrimPrefix(c.Etcd.Endpoints()[0], "http://"))
		dcsArgs = []string{"--dcs=etcd", "--etcd-endpoints=http://" + m.DCSProxy.Addr()}
	}
	t := c.Timing
	m.args = append(append([]string{c.bin}, dcsArgs...),
		"--cluster="+c.Name, "--name="+agentName,
		"--mysql-local-addr="+s.Addr(), "--advertise-mysql-addr="+m.mysqlAddr,
		"--mysql-datadir="+filepath.Join(s.Dir, "data"),
		"--mysql-password-file="+s.PasswordFile(tb, mysqltest.AgentPassword),
		"--replication-user="+mysqltest.ReplUser,
		"--replication-password-file="+s.PasswordFile(tb, mysqltest.ReplPassword),
		"--listen="+listen, "--advertise-api-url="+m.APIURL, "--api-token-file="+c.apiTokenFile, "--log-level=debug",
		"--ttl="+t.TTL.String(), "--loop-wait="+t.LoopWait.String(),
		"--retry-timeout="+t.RetryTimeout.String(), "--safety-margin="+t.SafetyMargin.String(),
		// A rebuild shuts mysqld down and waits for its supervisor to
		// start it again; here only a scenario that plays the supervisor
		// (superviseMySQL) lets the agent rebuild by itself, with
		// --rebuild-diverged=auto in AgentArgs, which comes later and wins.
		"--rebuild-diverged=report",
	)
	m.args = append(m.args, c.agentArgs...)
	m.root = s.RootDB(tb)
	m.app = openApp(tb, s)
	return m
}

// MySQLAddr is the address the member's agent advertises for its mysqld:
// its proxy's with Options.MySQLProxies, the server's otherwise.
func (m *Member) MySQLAddr() string { return m.mysqlAddr }

// dcsArgs are the agents' DCS flags.
func (c *Cluster) dcsArgs() []string {
	if c.Kube != nil {
		return c.Kube.agentArgs()
	}
	return []string{"--dcs=etcd", "--etcd-endpoints=" + c.Etcd.Endpoints()[0]}
}

func clusterName(testName string) string {
	name := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(name) > 40 {
		name = strings.Trim(name[:40], "-")
	}
	var b [3]byte
	rand.Read(b[:])
	return "e2e-" + name + "-" + hex.EncodeToString(b[:])
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// openApp is a pool for the application user with short timeouts, so a
// write to a dead or frozen server fails fast instead of hanging a probe.
func openApp(tb testing.TB, s *mysqltest.Server) *sql.DB { return openAppAt(tb, s.Addr()) }

// openAppAt is openApp for a server, or a proxy, at addr.
func openAppAt(tb testing.TB, addr string) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = mysqltest.AppUser, mysqltest.AppPassword, "tcp", addr, mysqltest.AppDatabase
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(10 * time.Second)
	tb.Cleanup(func() { db.Close() })
	return db
}

// Member returns the member called name.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	c.tb.Fatalf("no member %q in cluster %s", name, c.Name)
	return nil
}

// Others returns every member but the given ones.
func (c *Cluster) Others(not ...*Member) []*Member {
	var out []*Member
	for _, m := range c.Members {
		skip := false
		for _, n := range not {
			skip = skip || m == n
		}
		if !skip {
			out = append(out, m)
		}
	}
	return out
}

// ---- agent process control ----

// StartAgent starts the member's agent process; it fails the test if the
// agent already runs.
func (m *Member) StartAgent() {
	m.c.tb.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agent != nil {
		m.c.tb.Fatalf("agent %s already running (pid %d)", m.Name, m.agent.Pid())
	}
	m.starts++
	// Own process group, so signals reach the agent alone; killed with the
	// test process if that dies first.
	p, err := localproc.StartLogged(m.args, m.LogPath,
		fmt.Sprintf("=== e2e %s: starting agent %s (start #%d) ===", stamp(time.Now()), m.Name, m.starts))
	if err != nil {
		m.c.tb.Fatalf("starting agent %s: %v", m.Name, err)
	}
	m.agent, m.frozen = p, false
}

// Pid is the agent's process id, 0 when it does not run.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agent == nil {
		return 0
	}
	return m.agent.Pid()
}

// AgentRunning reports whether the agent process runs (frozen or not).
func (m *Member) AgentRunning() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agent != nil && !m.agent.Exited()
}

func (m *Member) mark(format string, args ...any) {
	f, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== e2e %s: %s ===\n", stamp(time.Now()), fmt.Sprintf(format, args...))
}

// signalAgent sends sig to the agent's process group and, when wait > 0,
// waits for it to exit, killing it after wait; an agent that had to be
// killed, or that left processes in its group, fails the test. It returns
// false when no agent ran.
func (m *Member) signalAgent(sig syscall.Signal, wait time.Duration) bool {
	m.mu.Lock()
	p := m.agent
	m.mu.Unlock()
	if p == nil {
		return false
	}
	if wait <= 0 {
		p.Signal(sig)
		return true
	}
	if err := p.Stop(sig, wait); err != nil {
		m.c.tb.Errorf("stopping agent %s (pid %d) with %v: %v", m.Name, p.Pid(), sig, err)
	}
	m.mu.Lock()
	m.agent, m.frozen = nil, false
	m.mu.Unlock()
	return true
}

// KillAgent kills the agent with SIGKILL, as a crash would, and waits.
func (m *Member) KillAgent() {
	m.mark("SIGKILL agent")
	if !m.signalAgent(syscall.SIGKILL, 10*time.Second) {
		m.c.tb.Fatalf("KillAgent %s: agent not running", m.Name)
	}
}

// StopAgent stops the agent with SIGTERM (a leader hands over first) and
// waits up to ttl + 5 s for it to exit.
func (m *Member) StopAgent() {
	m.mark("SIGTERM agent")
	if m.isFrozen() {
		m.ThawAgent()
	}
	if !m.signalAgent(syscall.SIGTERM, m.c.Timing.TTL+5*time.Second) {
		m.c.tb.Fatalf("StopAgent %s: agent not running", m.Name)
	}
}

func (m *Member) isFrozen() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frozen
}

// FreezeAgent stops the agent with SIGSTOP: a GC pause or a stalled node.
func (m *Member) FreezeAgent() {
	m.mark("SIGSTOP agent")
	if !m.signalAgent(syscall.SIGSTOP, 0) {
		m.c.tb.Fatalf("FreezeAgent %s: agent not running", m.Name)
	}
	m.mu.Lock()
	m.frozen = true
	m.mu.Unlock()
}

// ThawAgent resumes a frozen agent with SIGCONT.
func (m *Member) ThawAgent() {
	m.mark("SIGCONT agent")
	if !m.signalAgent(syscall.SIGCONT, 0) {
		m.c.tb.Fatalf("ThawAgent %s: agent not running", m.Name)
	}
	m.mu.Lock()
	m.frozen = false
	m.mu.Unlock()
}

// RestartAgent stops the agent if it runs (SIGTERM), then starts it again
// with the same flags, API address and log file.
func (m *Member) RestartAgent() {
	if m.AgentRunning() {
		m.StopAgent()
	} else {
		m.mu.Lock()
		m.agent = nil
		m.mu.Unlock()
	}
	m.StartAgent()
}

// KillMySQL kills mysqld with SIGKILL and waits for it to exit.
func (m *Member) KillMySQL() {
	m.mark("SIGKILL mysqld")
	m.Server.Kill()
}

// RestartMySQL starts the stopped mysqld again (same data, port, id) and
// waits until it accepts connections.
func (m *Member) RestartMySQL() {
	m.c.tb.Helper()
	m.mark("restarting mysqld")
	m.Server.Restart(m.c.tb)
}

// mysqldPid reads mysqld's pid file (mysqltest runs it with
// --pid-file=<Dir>/mysqld.pid).
func (m *Member) mysqldPid() int {
	m.c.tb.Helper()
	b, err := os.ReadFile(filepath.Join(m.Server.Dir, "mysqld.pid"))
	if err != nil {
		m.c.tb.Fatalf("%s: reading mysqld's pid file: %v", m.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		m.c.tb.Fatalf("%s: mysqld's pid file: %v", m.Name, err)
	}
	return pid
}

// FreezeMySQL stops mysqld with SIGSTOP: a server hung on a stalled disk,
// which neither answers nor refuses connections.
func (m *Member) FreezeMySQL() {
	m.c.tb.Helper()
	m.mark("SIGSTOP mysqld")
	if err := syscall.Kill(m.mysqldPid(), syscall.SIGSTOP); err != nil {
		m.c.tb.Fatalf("%s: SIGSTOP mysqld: %v", m.Name, err)
	}
	m.c.tb.Cleanup(func() { syscall.Kill(m.mysqldPid(), syscall.SIGCONT) })
}

// ThawMySQL resumes a frozen mysqld with SIGCONT.
func (m *Member) ThawMySQL() {
	m.c.tb.Helper()
	m.mark("SIGCONT mysqld")
	if err := syscall.Kill(m.mysqldPid(), syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		m.c.tb.Fatalf("%s: SIGCONT mysqld: %v", m.Name, err) // a killed mysqld needs no thaw
	}
}

// cleanup kills the agent, then mysqld: its data is thrown away, so a clean
// InnoDB shutdown (seconds per server) buys nothing.
func (m *Member) cleanup() {
	m.mu.Lock()
	running := m.agent != nil
	m.mu.Unlock()
	if running {
		// SIGKILL works on a stopped process too; SIGCONT lets it die at once.
		m.signalAgent(syscall.SIGCONT, 0)
		m.signalAgent(syscall.SIGKILL, 10*time.Second)
	}
	m.Server.Kill()
}

// ---- logs ----

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// dumpLogs prints the tail of every agent log and mysqld error log, and in
// Kubernetes mode the cluster's objects and Events.
func (c *Cluster) dumpLogs() {
	if c.Kube != nil {
		c.tb.Logf("----- Kubernetes objects of namespace %s -----\n%s  Events:\n%s", c.Kube.Namespace, c.Kube.describe(), c.Kube.describeEvents())
	}
	for _, m := range c.Members {
		c.tb.Logf("----- %s: last 60 lines of the agent log %s -----\n%s", m.Name, m.LogPath, localproc.Tail(m.LogPath, 60))
		c.tb.Logf("----- %s: last 10 lines of the mysqld error log -----\n%s", m.Name, localproc.Tail(m.Server.LogPath(), 10))
	}
}

// LogSince returns the agent log lines written after the last harness marker
// containing marker.
func (m *Member) LogSince(marker string) []string {
	b, err := os.ReadFile(m.LogPath)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "=== e2e ") && strings.Contains(lines[i], marker) {
			return lines[i+1:]
		}
	}
	return nil
}
