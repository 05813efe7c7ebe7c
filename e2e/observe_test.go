package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Everything here observes the cluster the way an operator or a client
// would: the agent's HTTP API, the MySQL protocol and the DCS keys.

// Status is the agent's GET /status document (the fields the scenarios use).
type Status struct {
	Name string `json:"name"`
	// Instance is the agent process's instance id.
	Instance     string `json:"instance"`
	Role         string `json:"role"`
	HoldsLock    bool   `json:"holds_lock"`
	Healthy      bool   `json:"healthy"`
	Writable     bool   `json:"writable"`
	GTIDExecuted string `json:"gtid_executed"`
	Replication  string `json:"replication"`
	Source       string `json:"source"`
	Leader       string `json:"leader"`
	Errant       string `json:"errant"`
	Error        string `json:"error"`
	Action       string `json:"action"`
	Reason       string `json:"reason"`
	Paused       bool   `json:"paused"`
	// Duplicate names the other live agent that runs with this member's
	// name; the agent refuses to act while it is set.
	Duplicate string `json:"duplicate"`
}

func (s *Status) String() string {
	if s == nil {
		return "no answer"
	}
	return fmt.Sprintf("role=%s lock=%v writable=%v healthy=%v repl=%s source=%s leader=%s action=%s (%s)%s%s%s",
		s.Role, s.HoldsLock, s.Writable, s.Healthy, s.Replication, s.Source, s.Leader, s.Action, s.Reason,
		cond(s.Errant != "", " errant="+s.Errant), cond(s.Error != "", " error="+s.Error),
		cond(s.Duplicate != "", " duplicate="+s.Duplicate))
}

func cond(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

func (m *Member) get(path string) (int, []byte, error) {
	resp, err := m.c.http.Get(m.APIURL + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Status fetches GET /status; nil when the agent does not answer within
// 500 ms (dead or frozen).
func (m *Member) Status() *Status {
	code, b, err := m.get("/status")
	if err != nil || code != http.StatusOK {
		return nil
	}
	var st Status
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	return &st
}

// IsPrimaryAPI reports whether GET /primary answers 200: the agent holds the
// lock and its mysqld is writable.
func (m *Member) IsPrimaryAPI() bool {
	code, _, err := m.get("/primary")
	return err == nil && code == http.StatusOK
}

// Metric returns the value of the agent's Prometheus sample whose name and
// labels start with series, e.g. `mysqlha_fencing_actions_total{` plus a
// label; ok is false when absent.
func (m *Member) Metric(series string) (float64, bool) {
	code, b, err := m.get("/metrics")
	if err != nil || code != http.StatusOK {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || !seriesMatch(name, series) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			return v, true
		}
	}
	return 0, false
}

// seriesMatch matches `name{a="1",b="2"}` against `name{b="2"}`: same name,
// and every wanted label present.
func seriesMatch(sample, want string) bool {
	wname, wlabels, _ := strings.Cut(want, "{")
	sname, slabels, _ := strings.Cut(sample, "{")
	if wname != sname {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(wlabels, "}"), ",") {
		if l != "" && !strings.Contains(slabels, l) {
			return false
		}
	}
	return true
}

// ---- MySQL protocol ----

func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// ReadOnly reads @@global.read_only as root over the socket.
func (m *Member) ReadOnly() (bool, error) {
	ctx, cancel := ctxFor(time.Second)
	defer cancel()
	var ro int
	err := m.root.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro)
	return ro != 0, err
}

// MustReadOnly is ReadOnly that fails the test when mysqld does not answer.
func (m *Member) MustReadOnly(tb testing.TB) bool {
	tb.Helper()
	ro, err := m.ReadOnly()
	if err != nil {
		tb.Fatalf("%s: reading @@read_only: %v", m.Name, err)
	}
	return ro
}

// Write inserts one row tagged tag as the application user, as a client
// would; the error is the client's.
func (m *Member) Write(tag string) error {
	ctx, cancel := ctxFor(2 * time.Second)
	defer cancel()
	_, err := m.app.ExecContext(ctx, "INSERT INTO e2e (tag) VALUES (?)", tag)
	return err
}

// WriteProbe checks as the application user whether a write would succeed,
// without committing one (so it leaves no GTID behind): an INSERT inside a
// transaction that is rolled back. read_only rejects the INSERT itself.
func (m *Member) WriteProbe() error {
	ctx, cancel := ctxFor(500 * time.Millisecond)
	defer cancel()
	conn, err := m.app.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, "INSERT INTO e2e (tag) VALUES ('split-brain-probe')")
	return err
}

// isReadOnlyError reports the server's "running with --read-only" refusal.
func isReadOnlyError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1290
}

// HasRow reports whether the row tagged tag is present (root, socket).
func (m *Member) HasRow(tag string) bool {
	ctx, cancel := ctxFor(time.Second)
	defer cancel()
	var n int
	err := m.root.QueryRowContext(ctx, "SELECT COUNT(*) FROM app.e2e WHERE tag = ?", tag).Scan(&n)
	return err == nil && n > 0
}

// GTIDBinlogPos reads @@global.gtid_binlog_pos: with log_slave_updates, all
// this server has executed.
func (m *Member) GTIDBinlogPos() (string, error) {
	ctx, cancel := ctxFor(time.Second)
	defer cancel()
	var pos string
	err := m.root.QueryRowContext(ctx, "SELECT @@global.gtid_binlog_pos").Scan(&pos)
	return pos, err
}

// ReplicaStatus is the part of SHOW SLAVE STATUS the scenarios check.
type ReplicaStatus struct {
	SourceHost, SourcePort string
	IORunning, SQLRunning  string
	UsingGTID, LastError   string
}

func (r *ReplicaStatus) String() string {
	if r == nil {
		return "not a replica"
	}
	return fmt.Sprintf("source=%s:%s io=%s sql=%s gtid=%s%s", r.SourceHost, r.SourcePort, r.IORunning, r.SQLRunning,
		r.UsingGTID, cond(r.LastError != "", " error="+r.LastError))
}

// Streaming reports both threads running.
func (r *ReplicaStatus) Streaming() bool {
	return r != nil && r.IORunning == "Yes" && r.SQLRunning == "Yes"
}

// ReplicaStatus runs SHOW SLAVE STATUS as root; nil, nil when the server
// is not a replica.
func (m *Member) ReplicaStatus() (*ReplicaStatus, error) {
	ctx, cancel := ctxFor(time.Second)
	defer cancel()
	rows, err := m.root.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	col := map[string]string{}
	for i, c := range cols {
		col[c] = vals[i].String
	}
	return &ReplicaStatus{
		SourceHost: col["Master_Host"], SourcePort: col["Master_Port"],
		IORunning: col["Slave_IO_Running"], SQLRunning: col["Slave_SQL_Running"],
		UsingGTID: col["Using_Gtid"], LastError: strings.TrimSpace(col["Last_IO_Error"] + " " + col["Last_SQL_Error"]),
	}, nil
}

// ---- waiting ----

const pollEvery = 25 * time.Millisecond

// waitFor polls check until it reports done, and fails the test after
// timeout with what it waited for and the last detail check gave.
func waitFor(tb testing.TB, timeout time.Duration, what string, check func() (done bool, detail string)) time.Duration {
	tb.Helper()
	start := time.Now()
	var detail string
	for {
		var ok bool
		if ok, detail = check(); ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			tb.Fatalf("timed out after %v waiting for %s; last observed:\n%s", timeout, what, detail)
		}
		time.Sleep(pollEvery)
	}
}

// ---- cluster-wide views ----

// describe summarises every member for failure messages.
func (c *Cluster) describe() string {
	var b strings.Builder
	for _, m := range c.Members {
		ro, err := m.ReadOnly()
		sql := fmt.Sprintf("read_only=%v", ro)
		if err != nil {
			sql = "mysqld unreachable"
		}
		rs, _ := m.ReplicaStatus()
		fmt.Fprintf(&b, "  %s: agent{%s} mysqld{%s, %s}\n", m.Name, m.Status(), sql, rs)
	}
	return b.String()
}

// Healthy checks the steady state: exactly one writable primary (by the API
// and by the server), every other member a read-only replica streaming from
// it. Members in skip are ignored (dead or frozen by the scenario).
func (c *Cluster) Healthy(skip ...*Member) (primary *Member, ok bool, detail string) {
	members := c.Others(skip...)
	sts := make([]*Status, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() { defer wg.Done(); sts[i] = m.Status() }()
	}
	wg.Wait()
	var problems []string
	for i, m := range members {
		st := sts[i]
		if st == nil {
			problems = append(problems, m.Name+": agent does not answer")
			continue
		}
		if st.Role == "primary" && st.HoldsLock && st.Writable {
			if primary != nil {
				return nil, false, "two primaries by the API: " + primary.Name + " and " + m.Name + "\n" + c.describe()
			}
			primary = m
		}
	}
	if primary == nil {
		return nil, false, "no primary yet\n" + c.describe()
	}
	for i, m := range members {
		st := sts[i]
		ro, err := m.ReadOnly()
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: mysqld: %v", m.Name, err))
		case m == primary && ro:
			problems = append(problems, m.Name+": primary by the API but read_only=1")
		case m == primary:
		case st == nil:
		case !ro:
			problems = append(problems, m.Name+": replica but read_only=0")
		case st.Role != "replica" || st.Replication != "running" || st.Source != primary.MySQLAddr():
			problems = append(problems, fmt.Sprintf("%s: not yet a streaming replica of %s: %s", m.Name, primary.Name, st))
		default:
			rs, err := m.ReplicaStatus()
			if err != nil || !rs.Streaming() || net.JoinHostPort(rs.SourceHost, rs.SourcePort) != primary.MySQLAddr() {
				problems = append(problems, fmt.Sprintf("%s: SHOW SLAVE STATUS: %s %v", m.Name, rs, err))
			}
		}
	}
	if len(problems) > 0 {
		return primary, false, strings.Join(problems, "\n") + "\n" + c.describe()
	}
	return primary, true, ""
}

// WaitHealthy waits for the steady state of Healthy and returns the primary.
func (c *Cluster) WaitHealthy(timeout time.Duration, skip ...*Member) *Member {
	c.tb.Helper()
	var primary *Member
	waitFor(c.tb, timeout, "one writable primary and streaming read-only replicas", func() (bool, string) {
		p, ok, detail := c.Healthy(skip...)
		primary = p
		return ok, detail
	})
	return primary
}

// EnsureTable creates the application table on primary, as the application
// user, and waits until every other live member has it.
func (c *Cluster) EnsureTable(primary *Member, skip ...*Member) {
	c.tb.Helper()
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	_, err := primary.app.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS e2e ("+
		"id BIGINT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(100) NOT NULL, "+
		"at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY (tag))")
	if err != nil {
		c.tb.Fatalf("creating the application table on %s: %v", primary.Name, err)
	}
	c.WriteAndReplicate(primary, "table-ready", skip...)
}

// WriteAndReplicate writes a row tagged tag on primary and waits until every
// other live member has applied it.
func (c *Cluster) WriteAndReplicate(primary *Member, tag string, skip ...*Member) {
	c.tb.Helper()
	err := primary.Write(tag)
	for i := 0; i < 3 && errors.Is(err, mysql.ErrInvalidConn); i++ {
		// A pooled session the agent killed (every fence does): an
		// application reconnects, and so do we.
		err = primary.Write(tag)
	}
	if err != nil {
		c.tb.Fatalf("writing %q on primary %s as the application user: %v\n%s", tag, primary.Name, err, c.describe())
	}
	for _, m := range c.Others(append(skip, primary)...) {
		waitFor(c.tb, 10*time.Second, fmt.Sprintf("row %q to replicate from %s to %s", tag, primary.Name, m.Name), func() (bool, string) {
			rs, err := m.ReplicaStatus()
			return m.HasRow(tag), fmt.Sprintf("%s: %s %v", m.Name, rs, err)
		})
	}
}

// Bootstrap starts nothing new: it waits for the initial primary, creates
// the application table, and returns the primary.
func (c *Cluster) Bootstrap() *Member {
	c.tb.Helper()
	p := c.WaitHealthy(60 * time.Second)
	c.EnsureTable(p)
	return p
}

// ---- DCS ----

func (c *Cluster) leaderKey() string { return "/mysqlha/" + c.Name + "/leader" }

// LeaderEvent is a change of the leader key; Holder is "" when it was
// deleted (released or expired).
type LeaderEvent struct {
	Holder string
	At     time.Time
}

// WatchLeader reports every change of the leader key from now on, stamped
// with when this process received it, until ctx ends. etcd only.
func (c *Cluster) WatchLeader(ctx context.Context) <-chan LeaderEvent {
	c.tb.Helper()
	if c.etcd == nil {
		c.tb.Fatal("WatchLeader watches the etcd leader key; this cluster runs on Kubernetes")
	}
	gctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	resp, err := c.etcd.Get(gctx, c.leaderKey())
	if err != nil {
		c.tb.Fatalf("reading the leader key: %v", err)
	}
	ch := make(chan LeaderEvent, 64)
	wch := c.etcd.Watch(ctx, c.leaderKey(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		defer close(ch)
		for wr := range wch {
			at := time.Now()
			for _, ev := range wr.Events {
				e := LeaderEvent{At: at}
				if ev.Type == clientv3.EventTypePut {
					var v struct {
						Holder string `json:"holder"`
					}
					json.Unmarshal(ev.Kv.Value, &v)
					e.Holder = v.Holder
					if e.Holder == "" {
						e.Holder = "(unreadable)"
					}
				}
				select {
				case ch <- e:
				default:
				}
			}
		}
	}()
	return ch
}

// LeaderHolder reads who holds the leader key now ("" for nobody); in
// Kubernetes mode the leader Lease's holderIdentity, which, unlike the etcd
// key, outlives an expired hold until someone takes it over.
func (c *Cluster) LeaderHolder() (string, error) {
	if c.Kube != nil {
		return c.Kube.LeaseHolder()
	}
	ctx, cancel := ctxFor(2 * time.Second)
	defer cancel()
	resp, err := c.etcd.Get(ctx, c.leaderKey())
	if err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	var v struct {
		Holder string `json:"holder"`
	}
	err = json.Unmarshal(resp.Kvs[0].Value, &v)
	return v.Holder, err
}

// ---- racing writers ----

// WriteWin is the outcome of FirstWrite.
type WriteWin struct {
	// Member accepted the first write (nil when none did in time), at At.
	Member *Member
	At     time.Time
	Tag    string
	// AlsoAccepted lists the other candidates that accepted a write before
	// the race was called off: with one primary at a time there are none.
	AlsoAccepted []string
}

// FirstWrite tries a write as the application user on each candidate every
// interval, in parallel, until one succeeds or timeout passes.
func FirstWrite(candidates []*Member, tagPrefix string, interval, timeout time.Duration) WriteWin {
	return FirstWriteThen(candidates, tagPrefix, interval, timeout, nil)
}

// FirstWriteThen is FirstWrite that also runs then, in the winning writer's
// goroutine, the moment the first write is acknowledged: for checks that
// must happen right then, before anything else.
func FirstWriteThen(candidates []*Member, tagPrefix string, interval, timeout time.Duration, then func(WriteWin)) WriteWin {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wins := make(chan WriteWin, len(candidates))
	var first sync.Once
	var wg sync.WaitGroup
	for _, m := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for n := 0; ; n++ {
				tag := fmt.Sprintf("%s-%s-%d", tagPrefix, m.Name, n)
				if err := m.Write(tag); err == nil {
					w := WriteWin{Member: m, At: time.Now(), Tag: tag}
					first.Do(func() {
						if then != nil {
							then(w)
						}
					})
					wins <- w
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	var w WriteWin
	select {
	case w = <-wins:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	close(wins)
	for o := range wins {
		w.AlsoAccepted = append(w.AlsoAccepted, o.Member.Name)
	}
	return w
}

// apiToken is the test clusters' API token (--api-token-file): published,
// as the test passwords are.
const apiToken = "test-only-api-token-0123456789abcdef"

// apiEndpoints are every path the agent's API serves; health marks those
// that answer strangers, with a status code and no data.
var apiEndpoints = []struct {
	method, path string
	health       bool
}{
	{"GET", "/healthz", true}, {"GET", "/readyz", true}, {"GET", "/primary", true}, {"GET", "/replica", true}, {"GET", "/lock", true},
	{"GET", "/status", false}, {"GET", "/cluster", false}, {"GET", "/metrics", false},
	{"GET", "/clone?member=x", false}, {"POST", "/failsafe", false},
}

// CheckAPIClosed asks every endpoint of every member without credentials,
// and with a wrong token: 401 and nothing of the member's data, or, for a
// health check, its code and one word.
func (c *Cluster) CheckAPIClosed(t *testing.T) {
	t.Helper()
	for _, m := range c.Members {
		for _, e := range apiEndpoints {
			for _, auth := range []string{"", "Bearer not-the-token-at-all-0123456789"} {
				req, err := http.NewRequest(e.method, m.APIURL+e.path, strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
				if err != nil {
					t.Errorf("%s %s %s: %v", m.Name, e.method, e.path, err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body := strings.TrimSpace(string(b))
				switch {
				case e.health && body != "ok" && body != "unavailable":
					t.Errorf("%s %s %s without credentials (%q): %d %q, want a code and one word", m.Name, e.method, e.path, auth, resp.StatusCode, body)
				case !e.health && (resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(body, "authentication required")):
					t.Errorf("%s %s %s without credentials (%q): %d %q, want 401 and no data", m.Name, e.method, e.path, auth, resp.StatusCode, body)
				}
			}
		}
	}
}
