package demo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/testenv/localproc"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// member is one MariaDB server and the agent process that manages it.
type member struct {
	name   string
	server *mysqltest.Server
	// apiURL is the agent's HTTP API; listen its listen address.
	apiURL, listen string
	// apiToken is what the agent's API asks of callers (--api-token-file).
	apiToken string
	// logPath is the agent's log (stdout and stderr, appended across restarts).
	logPath string
	// args is the agent's command line, binary first.
	args []string
	// app is a pool for the application user over TCP, with short timeouts
	// so that a write to a dead server fails fast.
	app *sql.DB

	mu    sync.Mutex
	agent *localproc.Process // nil when the agent does not run
}

func (m *member) addr() string { return m.server.Addr() }

// startAgent starts the agent process in its own process group (so a ^C on
// the terminal reaches only the supervisor, which stops everything in order)
// with SIGKILL as its parent-death signal (so it never outlives the
// supervisor). It returns the pid.
func (m *member) startAgent() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agent != nil {
		return 0, fmt.Errorf("agent %s already runs (pid %d)", m.name, m.agent.Pid())
	}
	banner := fmt.Sprintf("=== mysqlha-demo %s: starting agent %s ===", time.Now().UTC().Format(time.RFC3339Nano), m.name)
	p, err := localproc.StartLogged(m.args, m.logPath, banner)
	if err != nil {
		return 0, fmt.Errorf("starting agent %s: %w", m.name, err)
	}
	m.agent = p
	return p.Pid(), nil
}

// agentPid is the agent's pid, 0 when it does not run.
func (m *member) agentPid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agent == nil {
		return 0
	}
	return m.agent.Pid()
}

// stopAgent sends sig to the agent's process group and waits up to grace for
// it to exit, then kills it. What it leaves behind is the teardown's leak
// check's to report.
func (m *member) stopAgent(sig syscall.Signal, grace time.Duration) {
	m.mu.Lock()
	p := m.agent
	m.agent = nil
	m.mu.Unlock()
	if p != nil {
		p.Stop(sig, grace)
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
	req.Header.Set("Authorization", "Bearer "+m.apiToken)
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
