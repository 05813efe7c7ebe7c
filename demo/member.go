package demo

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/mysqlctl/mysqltest"
)

// member is one MariaDB server and the agent process that manages it.
type member struct {
	name   string
	server *mysqltest.Server
	// apiURL is the agent's HTTP API; listen its listen address.
	apiURL, listen string
	// logPath is the agent's log (stdout and stderr, appended across restarts).
	logPath string
	// args is the agent's command line, binary first.
	args []string
	// app is a pool for the application user over TCP, with short timeouts
	// so that a write to a dead server fails fast.
	app *sql.DB

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (m *member) addr() string { return m.server.Addr() }

// startAgent starts the agent process in its own process group (so a ^C on
// the terminal reaches only the supervisor, which stops everything in order)
// with SIGKILL as its parent-death signal (so it never outlives the
// supervisor). It returns the pid.
func (m *member) startAgent() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return 0, fmt.Errorf("agent %s already runs (pid %d)", m.name, m.cmd.Process.Pid)
	}
	f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close() // the child has its own descriptor
	fmt.Fprintf(f, "=== mysqlha-demo %s: starting agent %s ===\n", time.Now().UTC().Format(time.RFC3339Nano), m.name)
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting agent %s: %w", m.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	m.cmd, m.done = cmd, done
	return cmd.Process.Pid, nil
}

// agentPid is the agent's pid, 0 when it does not run.
func (m *member) agentPid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// stopAgent sends sig to the agent's process group and waits up to grace for
// it to exit, then kills it.
func (m *member) stopAgent(sig syscall.Signal, grace time.Duration) {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// memberStatus is the part of the agent's GET /status JSON the demo reads.
type memberStatus struct {
	Name        string `json:"name"`
	Role        string `json:"role"`
	HoldsLock   bool   `json:"holds_lock"`
	Healthy     bool   `json:"healthy"`
	Writable    bool   `json:"writable"`
	GTID        string `json:"gtid_executed"`
	Replication string `json:"replication"`
	Source      string `json:"source"`
	Leader      string `json:"leader"`
	Error       string `json:"error"`
	Action      string `json:"action"`
	Reason      string `json:"reason"`
}

// isPrimary: holds the lock and takes writes.
func (s *memberStatus) isPrimary() bool {
	return s != nil && s.Role == "primary" && s.HoldsLock && s.Writable
}

// replicates: a read-only replica streaming from addr.
func (s *memberStatus) replicates(addr string) bool {
	return s != nil && s.Role == "replica" && !s.Writable && s.Replication == "running" && s.Source == addr
}

// short is a one-word summary for live transition lines.
func (s *memberStatus) short() string {
	switch {
	case s == nil:
		return "down"
	case s.isPrimary():
		return "PRIMARY"
	case s.Role == "replica":
		return "replica(" + s.Replication + ")"
	case !s.Healthy:
		return "no-mysqld"
	}
	return s.Role
}

var statusClient = &http.Client{Timeout: 500 * time.Millisecond}

// status reads the agent's GET /status; nil when the agent does not answer.
func (m *member) status(ctx context.Context) *memberStatus {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.apiURL+"/status", nil)
	if err != nil {
		return nil
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st memberStatus
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil
	}
	return &st
}

// openApp opens the application user's pool: it holds only data
// privileges, so read_only stops it on replicas exactly as it would stop an
// application.
func openApp(s *mysqltest.Server) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = mysqltest.AppUser, mysqltest.AppPassword, "tcp", s.Addr(), mysqltest.AppDatabase
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 500*time.Millisecond, 2*time.Second, 2*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(5 * time.Second)
	return db, nil
}

// isReadOnly tells a refused write on a replica from other failures.
func isReadOnly(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1290 // ER_OPTION_PREVENTS_STATEMENT
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 4*n {
			lines = append([]string(nil), lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
