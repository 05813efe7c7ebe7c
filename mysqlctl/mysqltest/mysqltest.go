// Package mysqltest starts real MariaDB servers for tests: each with its own
// data directory, port, socket and server id, configured for GTID
// replication, and always stopped and removed when the test ends.
//
// The first Start in a test process initialises a template data directory
// (mariadb-install-db, about 8 s) with the users below; every server after
// that starts from a copy of it, so a server is up in about a second. The
// template is cached across test processes in the system temp directory,
// keyed by the mariadbd version.
//
// Servers run as child processes that die with the test process (Pdeathsig),
// so a crashed test leaves no server behind.
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

// AgentGrants is the least privilege the agent needs on MariaDB 10.6+.
const AgentGrants = "SELECT, RELOAD, PROCESS, REPLICATION SLAVE, BINLOG MONITOR, BINLOG ADMIN, " +
	"REPLICATION MASTER ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR, READ_ONLY ADMIN, CONNECTION ADMIN"

var setupSQL = []string{
	"CREATE USER '" + AgentUser + "'@'%' IDENTIFIED BY '" + AgentPassword + "'",
	"GRANT " + AgentGrants + " ON *.* TO '" + AgentUser + "'@'%'",
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
// GTID replication as the agent requires it.
var serverFlags = []string{
	"--no-defaults", "--user=root", "--skip-name-resolve", "--performance-schema=OFF",
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

// Start starts n servers in parallel, named db1..dbN with server ids 1..n.
func Start(tb testing.TB, n int, opts ...Options) []*Server {
	tb.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	template := ensureTemplate(tb)
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[k], errs[k] = newServer(tb, template, k+1, o)
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			tb.Cleanup(func() { s.destroy() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("starting MariaDB: %v", err)
	}
	return servers
}

func newServer(tb testing.TB, template string, id int, o Options) (*Server, error) {
	// Short paths: a Unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "mysqltest-")
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("cp", "-a", template, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("copying template: %v: %s", err, out)
	}
	host := o.BindAddress
	if host == "" {
		host = "127.0.0.1"
	}
	port, err := freePort(host)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		Name: fmt.Sprintf("db%d", id), ServerID: id, Host: host, Port: port,
		Dir: dir, Socket: filepath.Join(dir, "mysqld.sock"), opts: o,
	}
	if err := s.start(); err != nil {
		s.destroy()
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

func (s *Server) start() error {
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

// Kill stops the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() { s.stop(syscall.SIGKILL, 0) }

// Stop shuts the server down cleanly (SIGTERM), killing it after 20 s.
func (s *Server) Stop() { s.stop(syscall.SIGTERM, 20*time.Second) }

// Restart starts a stopped server again with the same data, port and id.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
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

func (s *Server) destroy() {
	s.stop(syscall.SIGTERM, 10*time.Second)
	os.RemoveAll(s.Dir)
}

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// ensureTemplate returns a data directory initialised once with the users
// above and no binary log, so every copy starts with an empty GTID history.
func ensureTemplate(tb testing.TB) string {
	tb.Helper()
	templateOnce.Do(func() { templateDir, templateErr = buildTemplate() })
	if templateErr != nil {
		tb.Fatalf("preparing MariaDB template: %v", templateErr)
	}
	return templateDir
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
