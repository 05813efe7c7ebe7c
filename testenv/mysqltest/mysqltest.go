// Package mysqltest starts real MariaDB servers (mariadbd processes), not
// test doubles, for tests and for the demo. Each has its own data directory,
// port, socket and server id and is configured for GTID replication; one
// started by Start is always stopped and removed when its test ends.
//
// The first Start in a test process initialises a template data directory
// (mariadb-install-db, about 8 s) with the users below; every server after
// that starts from a copy of it, so a server is up in about a second. The
// template is cached across test processes in the system temp directory,
// keyed by the mariadbd version.
//
// Servers run as child processes that die with the test process (Pdeathsig),
// so a crashed test leaves no server behind.
//
// Start and the methods taking a testing.TB are for tests. PrepareTemplate,
// Launch, (*Server).Start, Pid and Destroy work without a testing.TB, for
// programs that manage the servers' lifetime themselves (the demo
// supervisor, cmd/demo).
package mysqltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Users present on every server. The agent user holds exactly the privileges
// the README documents for the agent, so tests prove that list suffices; the
// application user holds only data privileges, so read_only stops it.
const (
	AgentUser     = "mysqlha"
	AgentPassword = "agent-secret"
	ReplUser      = "repl"
	ReplPassword  = "repl-secret"
	AppUser       = "app"
	AppPassword   = "app-secret"
	// AppDatabase is a schema the application user may write.
	AppDatabase = "app"
)

// AgentGrants is the least privilege the agent needs on MariaDB 10.6+
// (SHUTDOWN: agentctl reinit stops the rebuilt member's mysqld).
const AgentGrants = "SELECT, RELOAD, PROCESS, REPLICATION SLAVE, BINLOG MONITOR, BINLOG ADMIN, " +
	"REPLICATION MASTER ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN, SHUTDOWN"

// AgentSchemaGrants are the agent's privileges on its own schema,
// AgentSchema, where it keeps the dead-man switch (an event).
const AgentSchemaGrants = "CREATE, EVENT"

// AgentSchema is the agent's schema (mysqlctl.DeadmanSchema).
const AgentSchema = "mysqlha"

var setupSQL = []string{
	"CREATE USER '" + AgentUser + "'@'%' IDENTIFIED BY '" + AgentPassword + "'",
	"GRANT " + AgentGrants + " ON *.* TO '" + AgentUser + "'@'%'",
	"GRANT " + AgentSchemaGrants + " ON " + AgentSchema + ".* TO '" + AgentUser + "'@'%'",
	"CREATE USER '" + ReplUser + "'@'%' IDENTIFIED BY '" + ReplPassword + "'",
	"GRANT REPLICATION SLAVE ON *.* TO '" + ReplUser + "'@'%'",
	"CREATE DATABASE " + AppDatabase,
	"CREATE USER '" + AppUser + "'@'%' IDENTIFIED BY '" + AppPassword + "'",
	"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, LOCK TABLES ON " + AppDatabase + ".* TO '" + AppUser + "'@'%'",
}

// Binaries, overridable for unusual installs.
var (
	MariadbdPath  = envOr("MARIADBD", "mariadbd")
	InstallDBPath = envOr("MARIADB_INSTALL_DB", "mariadb-install-db")
)

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// serverFlags are shared by the template and every server: small memory,
// GTID replication and the event scheduler (the dead-man switch) as the
// agent requires them.
var serverFlags = []string{
	"--no-defaults", "--user=root", "--skip-name-resolve", "--performance-schema=OFF", "--event-scheduler=ON",
	"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M", "--max-connections=200",
}

// Options adjust one server.
type Options struct {
	// BindAddress defaults to 127.0.0.1.
	BindAddress string
	// NetNS runs the server inside that network namespace (ip netns exec).
	NetNS string
	// ExtraArgs are appended to the mariadbd command line.
	ExtraArgs []string
	// Port is the TCP port; 0 picks a free one. Start ignores it (servers
	// started together cannot share a port); Launch honours it.
	Port int
}

// Server is one running (or stopped) mariadbd.
type Server struct {
	Name     string
	ServerID int
	Host     string
	Port     int
	Dir      string
	Socket   string
	opts     Options

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts n servers in parallel, named db1..dbN with server ids 1..n,
// each in its own temporary directory; they are stopped and removed when the
// test ends.
func Start(tb testing.TB, n int, opts ...Options) []*Server {
	tb.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Port = 0
	if _, err := PrepareTemplate(); err != nil {
		tb.Fatalf("preparing MariaDB template: %v", err)
	}
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Short paths: a Unix socket path must fit in 108 bytes.
			dir, err := os.MkdirTemp("", "mysqltest-")
			if err != nil {
				errs[k] = err
				return
			}
			servers[k], errs[k] = Launch(dir, k+1, o)
			if errs[k] != nil {
				os.RemoveAll(dir)
			}
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			tb.Cleanup(s.Destroy)
		}
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("starting MariaDB: %v", err)
	}
	return servers
}

// Launch starts one server named db<id> with server id id, its data copied
// from the template (built first if needed, see PrepareTemplate), in dir,
// which it creates if missing and which must not hold a data directory yet.
// dir should be short: the Unix socket inside it must fit in 108 bytes. The
// server dies with the calling process (Pdeathsig); the caller stops it with
// Stop or Kill and removes it with Destroy.
func Launch(dir string, id int, o Options) (*Server, error) {
	template, err := PrepareTemplate()
	if err != nil {
		return nil, fmt.Errorf("preparing MariaDB template: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(data); err == nil {
		return nil, fmt.Errorf("%s already exists", data)
	}
	if out, err := exec.Command("cp", "-a", template, data).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying template: %v: %s", err, out)
	}
	host := o.BindAddress
	if host == "" {
		host = "127.0.0.1"
	}
	port := o.Port
	if port == 0 {
		if port, err = freePort(host); err != nil {
			os.RemoveAll(data)
			return nil, err
		}
	}
	s := &Server{
		Name: fmt.Sprintf("db%d", id), ServerID: id, Host: host, Port: port,
		Dir: dir, Socket: filepath.Join(dir, "mysqld.sock"), opts: o,
	}
	if err := s.Start(); err != nil {
		s.stop(syscall.SIGKILL, 0)
		os.RemoveAll(data)
		return nil, err
	}
	return s, nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) args() []string {
	args := append([]string{}, serverFlags...)
	args = append(args,
		"--datadir="+filepath.Join(s.Dir, "data"),
		"--socket="+s.Socket,
		"--pid-file="+filepath.Join(s.Dir, "mysqld.pid"),
		"--log-error="+s.LogPath(),
		"--bind-address="+s.Host,
		"--port="+strconv.Itoa(s.Port),
		"--server-id="+strconv.Itoa(s.ServerID),
		"--log-bin=mysql-bin", "--relay-log=relay-bin", "--log-slave-updates", "--binlog-format=ROW",
		"--gtid-strict-mode=1",
	)
	return append(args, s.opts.ExtraArgs...)
}

// LogPath is the server's error log.
func (s *Server) LogPath() string { return filepath.Join(s.Dir, "error.log") }

// Addr is host:port for TCP clients.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Start starts the server if it is not running (a stopped server keeps its
// data, port and id) and waits up to 30 s until it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	name, args := MariadbdPath, s.args()
	if s.opts.NetNS != "" {
		name, args = "ip", append([]string{"netns", "exec", s.opts.NetNS, MariadbdPath}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	return s.waitReady(done)
}

func (s *Server) waitReady(done chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up; log tail:\n%s", s.Name, s.logTail())
		default:
		}
		if db, err := s.open("root", "", true); err == nil {
			err = db.Ping()
			db.Close()
			if err == nil {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after 30s; log tail:\n%s", s.Name, s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.LogPath())
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func (s *Server) open(user, password string, socket bool) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd = user, password
	c.Net, c.Addr = "tcp", s.Addr()
	if socket {
		c.Net, c.Addr = "unix", s.Socket
	}
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	connector, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// RootDB is a root session over the Unix socket, for test set-up and checks.
func (s *Server) RootDB(tb testing.TB) *sql.DB { return s.DB(tb, "root", "") }

// DB is a pool for user over the socket (root) or TCP (everyone else), closed
// when the test ends.
func (s *Server) DB(tb testing.TB, user, password string) *sql.DB {
	tb.Helper()
	db, err := s.open(user, password, user == "root")
	if err != nil {
		tb.Fatalf("opening %s as %s: %v", s.Name, user, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// PasswordFile writes password to a file (as a mounted Secret would be) and
// returns its path.
func (s *Server) PasswordFile(tb testing.TB, password string) string {
	tb.Helper()
	f, err := os.CreateTemp(s.Dir, "password-")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(password + "\n"); err != nil {
		tb.Fatal(err)
	}
	return f.Name()
}

// Running reports whether the server process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Pid is the process id of the running server (of "ip netns exec" with
// NetNS), 0 when it is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Freeze stops the running server with SIGSTOP, as a server hung on a
// stalled disk looks: its connections stay open and nothing answers. It is
// resumed (SIGCONT) when the test ends, before the server is stopped.
func (s *Server) Freeze(tb testing.TB) {
	tb.Helper()
	pid := s.Pid()
	if pid == 0 {
		tb.Fatalf("freezing %s: not running", s.Name)
	}
	tb.Cleanup(s.Thaw)
	// The process group also covers mariadbd under "ip netns exec".
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		tb.Fatalf("freezing %s: %v", s.Name, err)
	}
	// A signal is delivered asynchronously: until every thread has stopped,
	// one may still answer a query.
	deadline := time.Now().Add(5 * time.Second)
	for !allThreadsStopped(pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("freezing %s: threads still running 5s after SIGSTOP", s.Name)
		}
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reads the state of every thread of pid from /proc.
func allThreadsStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		// "tid (comm) S ...": the state follows the last parenthesis, as comm
		// may contain anything.
		rest := b[bytes.LastIndexByte(b, ')')+1:]
		if f := bytes.Fields(rest); len(f) == 0 || (f[0][0] != 'T' && f[0][0] != 't') {
			return false
		}
	}
	return true
}

// Thaw resumes a frozen server (SIGCONT); on a running one it does nothing.
func (s *Server) Thaw() {
	if pid := s.Pid(); pid != 0 {
		syscall.Kill(-pid, syscall.SIGCONT)
	}
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() { s.stop(syscall.SIGKILL, 0) }

// Stop shuts the server down cleanly (SIGTERM), killing it after 20 s.
func (s *Server) Stop() { s.stop(syscall.SIGTERM, 20*time.Second) }

// Restart starts a stopped server again with the same data, port and id.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.Start(); err != nil {
		tb.Fatalf("restarting %s: %v", s.Name, err)
	}
}

func (s *Server) stop(sig syscall.Signal, grace time.Duration) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	// The process group also covers mariadbd under "ip netns exec".
	syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Destroy stops the server (SIGTERM, SIGKILL after 10 s) and removes its
// directory.
func (s *Server) Destroy() {
	s.stop(syscall.SIGTERM, 10*time.Second)
	os.RemoveAll(s.Dir)
}

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// PrepareTemplate returns the template data directory, initialised once per
// machine and mariadbd version with the users above and no binary log, so
// every copy starts with an empty GTID history. The first call on a machine
// runs mariadb-install-db (about 8 s); later calls return the cached copy.
func PrepareTemplate() (string, error) {
	templateOnce.Do(func() { templateDir, templateErr = buildTemplate() })
	return templateDir, templateErr
}

func buildTemplate() (string, error) {
	version, err := exec.Command(MariadbdPath, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s not runnable (install it: apt-get install -y mariadb-server, or run make test): %w", MariadbdPath, err)
	}
	sum := sha256.Sum256(append(version, []byte(strings.Join(append(serverFlags, setupSQL...), " "))...))
	final := filepath.Join(os.TempDir(), "mysqlha-mariadb-template-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(final, "ready")); err == nil {
		return filepath.Join(final, "data"), nil
	}
	work, err := os.MkdirTemp("", "mysqltest-template-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	data := filepath.Join(work, "data")
	install := exec.Command(InstallDBPath, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--user=root", "--skip-test-db",
		"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M")
	if out, err := install.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", InstallDBPath, err, out)
	}
	if err := createUsers(work, data); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(work, "ready"), nil, 0o644); err != nil {
		return "", err
	}
	// Concurrent test processes may race here; whoever renames first wins and
	// the others use its result.
	if err := os.Rename(work, final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, "ready")); statErr != nil {
			return "", fmt.Errorf("publishing template: %w", err)
		}
	}
	return filepath.Join(final, "data"), nil
}

func createUsers(work, data string) error {
	socket := filepath.Join(work, "s.sock")
	args := append(append([]string{}, serverFlags...), "--datadir="+data, "--socket="+socket,
		"--skip-networking", "--pid-file="+filepath.Join(work, "p.pid"), "--log-error="+filepath.Join(work, "err.log"))
	cmd := exec.Command(MariadbdPath, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}()
	s := &Server{Socket: socket}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		db, err := s.open("root", "", true)
		if err == nil {
			if err = db.PingContext(ctx); err == nil {
				defer db.Close()
				for _, q := range setupSQL {
					if _, err := db.ExecContext(ctx, q); err != nil {
						return fmt.Errorf("template set-up %q: %w", q, err)
					}
				}
				return nil
			}
			db.Close()
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("template server exited: %v: %s", err, stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("template server not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
