package deploy

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/mysqlha/mysqlha/agent"
	"github.com/mysqlha/mysqlha/backup"
	"github.com/mysqlha/mysqlha/internal/apiauth"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

var (
	cnfScript     = filepath.Join("base", "scripts", "mysqlha-cnf.sh")
	initdbScript  = filepath.Join("base", "scripts", "initdb-users.sh")
	preStopScript = filepath.Join("base", "scripts", "prestop-wait.sh")
	startScript   = filepath.Join("base", "scripts", "mysqld-start.sh")
)

// initialisedDatadir is a data directory the server has initialised (it has
// the mysql schema) but that has no mysqlha-server-id yet.
func initialisedDatadir(t *testing.T) string {
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, "mysql"), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// A member's server_id belongs to its data: an empty data directory (a new
// member, or one whose volume was lost) gets a new id ending in the ordinal,
// kept in the data directory and reused at every later start, so a member
// recreated empty never skips its predecessor's transactions as its own.
func TestServerIDBelongsToTheData(t *testing.T) {
	read := func(datadir string) (string, string) {
		t.Helper()
		dir := t.TempDir()
		out, code := runScript(t, cleanEnv("HOSTNAME=mysqlha-2", "MYSQLHA_DATADIR="+datadir), cnfScript, dir)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "mysqlha.cnf"))
		if err != nil {
			t.Fatal(err)
		}
		kept, err := os.ReadFile(filepath.Join(datadir, "mysqlha-server-id"))
		if err != nil {
			t.Fatalf("server_id not kept in the data directory: %v", err)
		}
		return cnfSettings(string(b))["server_id"], strings.TrimSpace(string(kept))
	}
	empty1, empty2 := t.TempDir(), t.TempDir()
	id1, kept1 := read(empty1)
	id2, _ := read(empty2)
	n, err := strconv.ParseUint(id1, 10, 32)
	if err != nil || n <= 1000 || n%1000 != 102 || id1 == id2 || kept1 != id1 {
		t.Errorf("empty data directories got server_id %s and %s (kept %s): want new ids > 1000 ending in 102, distinct, kept", id1, id2, kept1)
	}
	if again, _ := read(empty1); again != id1 {
		t.Errorf("the same data directory got %s, then %s: the id must stay with the data", id1, again)
	}
	if old, kept := read(initialisedDatadir(t)); old != "102" || kept != "102" {
		t.Errorf("an initialised data directory without an id got %s (kept %s), want the ordinal's 102", old, kept)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "mysqlha-server-id"), []byte("banana\n"), 0o644)
	if out, code := runScript(t, cleanEnv("HOSTNAME=mysqlha-2", "MYSQLHA_DATADIR="+bad), cnfScript, t.TempDir()); code == 0 || !strings.Contains(out, "banana") {
		t.Errorf("a corrupt id file was accepted (exit %d):\n%s", code, out)
	}
}

func TestServerCnfScript(t *testing.T) {
	initialised := initialisedDatadir(t)
	for _, tc := range []struct {
		name     string
		env      []string
		wantCode int
		want     map[string]string // settings; "" = bare option
		absent   []string
	}{
		{name: "ordinal 2", env: []string{"HOSTNAME=mysqlha-2"},
			want: map[string]string{"server_id": "102", "report_host": "mysqlha-2", "gtid_strict_mode": "ON", "read_only": "ON"}},
		{name: "ordinal 0", env: []string{"HOSTNAME=mysqlha-0"}, want: map[string]string{"server_id": "100"}},
		{name: "dashes in the name, two digits", env: []string{"HOSTNAME=my-db-12"}, want: map[string]string{"server_id": "112"}},
		{name: "leading zero is decimal", env: []string{"HOSTNAME=db-08"}, want: map[string]string{"server_id": "108"}},
		{name: "other base", env: []string{"HOSTNAME=mysqlha-2", "MYSQLHA_SERVER_ID_BASE=1000"}, want: map[string]string{"server_id": "1002"}},
		{name: "knobs", env: []string{"HOSTNAME=mysqlha-1", "MYSQLHA_REPORT_HOST=10.0.0.7", "MYSQLHA_BIND_ADDRESS=::",
			"MYSQLHA_BINLOG_EXPIRE_SECONDS=3600", "MYSQLHA_EXTRA_CNF=innodb_buffer_pool_size = 2G\nmax_connections = 500"},
			want: map[string]string{"report_host": "10.0.0.7", "bind_address": "::", "binlog_expire_logs_seconds": "3600",
				"innodb_buffer_pool_size": "2G", "max_connections": "500"}},
		{name: "mysql on an initialised datadir", env: []string{"HOSTNAME=mysqlha-1", "MYSQLHA_FLAVOR=mysql", "MYSQLHA_DATADIR=" + initialised},
			want:   map[string]string{"server_id": "101", "gtid_mode": "ON", "enforce_gtid_consistency": "ON", "log_replica_updates": "ON", "super_read_only": "ON", "read_only": "ON"},
			absent: []string{"gtid_strict_mode", "log_slave_updates", "gtid_domain_id", "binlog_format"}},
		{name: "mysql on an empty datadir: no super_read_only yet", env: []string{"HOSTNAME=mysqlha-1", "MYSQLHA_FLAVOR=mysql", "MYSQLHA_DATADIR=" + t.TempDir()},
			want: map[string]string{"read_only": "ON"}, absent: []string{"super_read_only"}},
		{name: "no ordinal", env: []string{"HOSTNAME=mysqlha"}, wantCode: 1},
		{name: "ordinal not a number", env: []string{"HOSTNAME=mysqlha-x"}, wantCode: 1},
		{name: "no hostname", env: []string{"HOSTNAME="}, wantCode: 1},
		{name: "unknown flavor", env: []string{"HOSTNAME=mysqlha-1", "MYSQLHA_FLAVOR=postgres"}, wantCode: 1},
		{name: "bad base", env: []string{"HOSTNAME=mysqlha-1", "MYSQLHA_SERVER_ID_BASE=1e3"}, wantCode: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := tc.env
			if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "MYSQLHA_DATADIR=") }) {
				// An initialised data directory from before the id file: the
				// ordinal's id. Empty ones are TestServerIDBelongsToTheData's.
				env = append(slices.Clone(env), "MYSQLHA_DATADIR="+initialisedDatadir(t))
			}
			out, code := runScript(t, cleanEnv(env...), cnfScript, dir)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.wantCode, out)
			}
			b, err := os.ReadFile(filepath.Join(dir, "mysqlha.cnf"))
			if tc.wantCode != 0 {
				if err == nil {
					t.Errorf("failed, yet wrote mysqlha.cnf:\n%s", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("# ")) || !bytes.Contains(b, []byte("\n[mysqld]\n")) {
				t.Errorf("no [mysqld] section:\n%s", b)
			}
			s := cnfSettings(string(b))
			for k, v := range tc.want {
				if got, ok := s[k]; !ok || got != v {
					t.Errorf("%s = %q (set: %v), want %q\n%s", k, got, ok, v, b)
				}
			}
			for _, k := range tc.absent {
				if _, ok := s[k]; ok {
					t.Errorf("%s is set:\n%s", k, b)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// fakeAgent serves GET /status as the agent does (agent.MemberStatus,
// indented JSON), holding the lock while holds() says so.
func fakeAgent(t *testing.T, handler http.Handler) (port string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

// statusHandler plays an agent older than GET /lock: its /status, open to
// anyone.
func statusHandler(holds func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ") // as agent.writeJSON
		enc.Encode(agent.MemberStatus{Name: "mysqlha-0", Role: "primary", HoldsLock: holds()})
	}
}

// lockHandler plays today's agent as deployed: GET /lock 200 while it
// holds the lock, else 503, behind the API token the hook does not have.
func lockHandler(holds func() bool) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/lock" {
			http.NotFound(w, r)
			return
		}
		code := http.StatusServiceUnavailable
		if holds() {
			code = http.StatusOK
		}
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(agent.MemberStatus{Name: "mysqlha-0", HoldsLock: code == http.StatusOK})
	})
	return apiauth.Guard{Token: "test-only-api-token-0123456789"}.Protect(h, agent.HealthPaths...)
}

func TestPreStopWait(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, port string, limit int) (string, int, time.Duration) {
		start := time.Now()
		out, code := runScript(t, cleanEnv("MYSQLHA_API_PORT="+port), preStopScript, strconv.Itoa(limit))
		return out, code, time.Since(start)
	}

	t.Run("waits for the hand-over", func(t *testing.T) {
		t.Parallel()
		released := time.Now().Add(2500 * time.Millisecond)
		var polls atomic.Int32
		port := fakeAgent(t, lockHandler(func() bool { polls.Add(1); return time.Now().Before(released) }))
		out, code, took := run(t, port, 20)
		if code != 0 || took < 2500*time.Millisecond || took > 6*time.Second {
			t.Fatalf("exit %d after %v (want 0 after 2.5 to 6 s):\n%s", code, took, out)
		}
		if polls.Load() < 2 || !strings.Contains(out, "free") {
			t.Errorf("%d polls; output:\n%s", polls.Load(), out)
		}
	})
	t.Run("an agent older than /lock: its /status", func(t *testing.T) {
		t.Parallel()
		released := time.Now().Add(2500 * time.Millisecond)
		port := fakeAgent(t, statusHandler(func() bool { return time.Now().Before(released) }))
		out, code, took := run(t, port, 20)
		if code != 0 || took < 2500*time.Millisecond || took > 6*time.Second || !strings.Contains(out, "free") {
			t.Fatalf("exit %d after %v (want 0 after 2.5 to 6 s, free):\n%s", code, took, out)
		}
	})
	t.Run("gives up after its bound", func(t *testing.T) {
		t.Parallel()
		port := fakeAgent(t, lockHandler(func() bool { return true }))
		out, code, took := run(t, port, 3)
		if code != 1 || took < 3*time.Second || took > 7*time.Second {
			t.Fatalf("exit %d after %v (want 1 after 3 to 7 s):\n%s", code, took, out)
		}
		if !strings.Contains(out, "still held") {
			t.Errorf("output does not say why:\n%s", out)
		}
	})
	t.Run("returns at once when the lock is not held", func(t *testing.T) {
		t.Parallel()
		port := fakeAgent(t, lockHandler(func() bool { return false }))
		out, code, took := run(t, port, 20)
		if code != 0 || took > 1500*time.Millisecond {
			t.Fatalf("exit %d after %v:\n%s", code, took, out)
		}
	})
	t.Run("returns at once when the agent has exited", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		ln.Close() // nothing listens there now
		out, code, took := run(t, port, 20)
		if code != 0 || took > 1500*time.Millisecond || !strings.Contains(out, "gone") {
			t.Fatalf("exit %d after %v:\n%s", code, took, out)
		}
	})
	t.Run("a stalled agent is waited for, within the bound", func(t *testing.T) {
		t.Parallel()
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		port := fakeAgent(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
		}))
		out, code, took := run(t, port, 3)
		if code != 1 || took < 3*time.Second || took > 8*time.Second || !strings.Contains(out, "unknown") {
			t.Fatalf("exit %d after %v (want 1 after 3 to 8 s, lock unknown):\n%s", code, took, out)
		}
	})
	t.Run("an error answer is not a release", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		free := lockHandler(func() bool { return false })
		port := fakeAgent(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 2 {
				http.Error(w, `{"holds_lock": false}`, http.StatusInternalServerError)
				return
			}
			free.ServeHTTP(w, r)
		}))
		out, code, took := run(t, port, 20)
		if code != 0 || took < 2*time.Second {
			t.Fatalf("exit %d after %v (want 0 after the two error answers, 2 s):\n%s", code, took, out)
		}
	})
}

// The server container's command starts the server in its own place (the
// kubelet's signals reach it), unless a rebuild's marker (the name the
// agent writes, backup.MarkerFile) says that the data directory is being
// swapped: then it waits until the marker is gone.
func TestMysqldStartWaitsForTheSwap(t *testing.T) {
	t.Parallel()
	t.Run("no marker: exec at once", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command("bash", startScript, "sh", "-c", `echo "pid $$"`)
		cmd.Env = cleanEnv("MYSQLHA_DATADIR=" + t.TempDir())
		out, err := cmd.CombinedOutput()
		if want := fmt.Sprintf("pid %d\n", cmd.Process.Pid); err != nil || string(out) != want {
			t.Fatalf("%v: %q, want %q (the command in the script's place)", err, out, want)
		}
	})
	t.Run("no command", func(t *testing.T) {
		t.Parallel()
		out, code := runScript(t, cleanEnv("MYSQLHA_DATADIR="+t.TempDir()), startScript)
		if code != 2 || !strings.Contains(out, "docker-entrypoint.sh mariadbd") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("marker: waits until it is gone", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		marker := filepath.Join(dir, backup.MarkerFile)
		if err := os.WriteFile(marker, []byte("swapping"), 0o600); err != nil {
			t.Fatal(err)
		}
		started := filepath.Join(dir, "started")
		var out bytes.Buffer
		cmd := exec.Command("bash", startScript, "touch", started)
		cmd.Env = cleanEnv("MYSQLHA_DATADIR=" + dir)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if _, err := os.Stat(started); err == nil {
			t.Fatal("the server started while the marker exists")
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if _, serr := os.Stat(started); err != nil || serr != nil {
				t.Fatalf("%v, started: %v\n%s", err, serr, out.String())
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("still waiting 5 s after the marker went:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "agentctl reinit") {
			t.Errorf("the wait is not explained:\n%s", out.String())
		}
	})
}

// TestInitdbMySQLStatements: no MySQL server can run here, so the MySQL
// flavor of the initdb script is checked at the statement level: what it
// sends to docker_process_sql with the env the mysql84 overlay gives the
// server container (and a stand-in for the image's mysql_tzinfo_to_sql).
func TestInitdbMySQLStatements(t *testing.T) {
	sts := only[*appsv1.StatefulSet](t, kustomizeBuild(t, mysql84Variant.dir))
	server := mustContainer(t, sts.Spec.Template.Spec.Containers, "mysql")
	pe := testPod
	pe.secrets = map[string]string{"root-password": "root", "agent-password": `a'b\c`, "repl-password": "r"}
	env := resolvePodEnv(t, &sts.Spec.Template.Spec, server, pe)
	if !slices.Contains(env, "MYSQL_INITDB_SKIP_TZINFO=1") {
		t.Errorf("the overlay leaves the image's own (binlogged) time zone load on: %q", env)
	}
	bin := t.TempDir()
	tz := "#!/bin/sh\necho \"INSERT INTO time_zone_name (Name) VALUES ('Local time zone must be set--see zic manual page');\"\n"
	if err := os.WriteFile(filepath.Join(bin, "mysql_tzinfo_to_sql"), []byte(tz), 0o755); err != nil {
		t.Fatal(err)
	}
	sqlFile := filepath.Join(t.TempDir(), "sql")
	env = append(env, "PATH="+bin+":"+os.Getenv("PATH"), "LANG=C", "SQL_OUT="+sqlFile)
	out, code := sourceInitdb(t, env, `docker_process_sql() { echo "-- call $*" >>"$SQL_OUT"; cat >>"$SQL_OUT"; }`)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile(sqlFile)
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, s := range strings.Split(string(b), "\n") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	want := []string{
		// The time zone tables, unlogged.
		"-- call --database=mysql",
		"SET SESSION sql_log_bin = 0;",
		"INSERT INTO time_zone_name (Name) VALUES ('FCTY');",
		// The users, unlogged.
		"-- call",
		"SET SESSION sql_log_bin = 0;",
		"SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '');",
		`CREATE USER IF NOT EXISTS 'mysqlha'@'%' IDENTIFIED BY 'a\'b\\c';`,
		`ALTER USER 'mysqlha'@'%' IDENTIFIED BY 'a\'b\\c';`,
		// The README's MySQL 8 list.
		"GRANT SYSTEM_VARIABLES_ADMIN, CONNECTION_ADMIN, REPLICATION_SLAVE_ADMIN, REPLICATION CLIENT, PROCESS, RELOAD, SHUTDOWN ON *.* TO 'mysqlha'@'%';",
		// The dead-man switch's event, in the agent's schema.
		"GRANT CREATE, EVENT ON mysqlha.* TO 'mysqlha'@'%';",
		"CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'r';",
		"ALTER USER 'repl'@'%' IDENTIFIED BY 'r';",
		"GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';",
	}
	if !slices.Equal(stmts, want) {
		t.Errorf("statements%s\nwant%s", fmtList(stmts), fmtList(want))
	}
}

func TestInitdbRefuses(t *testing.T) {
	fake := `docker_process_sql() { cat >/dev/null; }`
	for _, tc := range []struct {
		name, define string
		env          []string
		says         string
	}{
		{"no agent password", fake, []string{"MYSQLHA_REPL_PASSWORD=r"}, "must be set"},
		{"no replication password", fake, []string{"MYSQLHA_AGENT_PASSWORD=a"}, "must be set"},
		{"run, not sourced by the entrypoint", "", []string{"MYSQLHA_AGENT_PASSWORD=a", "MYSQLHA_REPL_PASSWORD=r"}, "docker_process_sql is not defined"},
		{"unknown flavor", fake, []string{"MYSQLHA_FLAVOR=oracle", "MYSQLHA_AGENT_PASSWORD=a", "MYSQLHA_REPL_PASSWORD=r"}, "want mariadb or mysql"},
		{"bad user name", fake, []string{"MYSQLHA_AGENT_USER=x'y", "MYSQLHA_AGENT_PASSWORD=a", "MYSQLHA_REPL_PASSWORD=r"}, "user name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := sourceInitdb(t, cleanEnv(tc.env...), tc.define)
			if code == 0 || !strings.Contains(out, tc.says) {
				t.Errorf("exit %d, want failure saying %q:\n%s", code, tc.says, out)
			}
		})
	}
}

// sourceInitdb sources the initdb script the way the images' entrypoints
// do: from a bash running with set -eo pipefail, after defining
// docker_process_sql (define). It also checks that the script leaves
// nothing behind in the entrypoint's shell.
func sourceInitdb(t *testing.T, env []string, define string) (string, int) {
	t.Helper()
	prog := "set -eo pipefail\n" + define + "\n. \"$1\"\n" +
		`if declare -F mysqlha_create_users >/dev/null || [[ -n ${agent_grants:-} ]]; then echo "initdb script left state behind" >&2; exit 99; fi` + "\n"
	cmd := exec.Command("bash", "-c", prog, "entrypoint", initdbScript)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		if ee.ExitCode() == 99 {
			t.Fatalf("%s", out)
		}
		return string(out), ee.ExitCode()
	}
	t.Fatal(err)
	return "", -1
}

// TestMariaDBRunsTheDeployedConfig starts a real MariaDB with the snippet
// the base's init container writes (with the env the base manifest gives
// it) and then does what the image's entrypoint does on a first start:
// sources the initdb script, as root over the socket, under that config
// (read_only ON, binary log on). It checks the settings took effect, the
// users have the README's grants and can log in, nothing reached the
// binary log, and the server probes' command tells a live server from a
// stopped one.
func TestMariaDBRunsTheDeployedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	sts := only[*appsv1.StatefulSet](t, kustomizeBuild(t, baseVariant.dir))
	spec := &sts.Spec.Template.Spec
	cnf := writeCnf(t, sts, "mysqlha-2", testPod)
	srv := startMariaDB(t, cnf)
	root := srv.db(t, "root", "", true)
	ctx := context.Background()

	// The snippet's settings, as the server reports them. (skip_slave_start
	// is an option, not a variable, in 10.11: that the server started with
	// it is the check; mariadbd refuses unknown options.)
	for name, want := range map[string]string{
		"server_id": "102", "read_only": "ON", "log_bin": "ON", "log_slave_updates": "ON", "gtid_strict_mode": "ON",
		"binlog_format": "ROW", "sync_binlog": "1", "innodb_flush_log_at_trx_commit": "1",
		"binlog_expire_logs_seconds": "604800", "gtid_domain_id": "0", "skip_name_resolve": "ON", "event_scheduler": "ON",
		"report_host": "mysqlha-2.mysqlha.db.svc", "host_cache_size": "0",
		"log_bin_basename": filepath.Join(srv.dir, "data", "mysql-bin"),
	} {
		var got string
		if err := root.QueryRowContext(ctx, "SELECT @@GLOBAL."+name).Scan(&got); err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		if name == "read_only" || name == "log_bin" || name == "log_slave_updates" || name == "gtid_strict_mode" ||
			name == "skip_name_resolve" {
			got = map[string]string{"1": "ON", "0": "OFF"}[got]
		}
		if got != want {
			t.Errorf("@@%s = %q, want %q", name, got, want)
		}
	}

	// The template's users hold the README's grants: the reference. The
	// users are dropped (unlogged) and made again by the script.
	refAgent := grantsOf(t, root, mysqltest.AgentUser)
	refRepl := grantsOf(t, root, mysqltest.ReplUser)
	conn := rootConn(t, root)
	for _, q := range []string{"SET SESSION sql_log_bin = 0", "DROP USER '" + mysqltest.AgentUser + "'@'%'", "DROP USER '" + mysqltest.ReplUser + "'@'%'"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := binlogState(t, root)

	server := mustContainer(t, spec.Containers, "mariadb")
	const agentPW, replPW = `ag'e"nt\pa$s word`, `re\'pl;--`
	pe := testPod
	pe.secrets = map[string]string{"root-password": "", "agent-password": agentPW, "repl-password": replPW}
	env := cleanEnv(append(resolvePodEnv(t, spec, server, pe), "SOCK="+srv.socket)...)
	// The entrypoint's client: root on the socket, SQL on stdin.
	define := `docker_process_sql() { mariadb --no-defaults --protocol=socket --socket="$SOCK" -uroot "$@"; }`
	for round := 1; round <= 2; round++ { // the second run finds the users in place
		out, code := sourceInitdb(t, env, define)
		if code != 0 {
			t.Fatalf("initdb run %d: exit %d:\n%s", round, code, out)
		}
		if got := grantsOf(t, root, mysqltest.AgentUser); !slices.Equal(got, refAgent) {
			t.Errorf("run %d: agent user privileges%s\nwant (README, as the integration tests use them)%s", round, fmtList(got), fmtList(refAgent))
		}
		if got := grantsOf(t, root, mysqltest.ReplUser); !slices.Equal(got, refRepl) {
			t.Errorf("run %d: replication user privileges%s\nwant%s", round, fmtList(got), fmtList(refRepl))
		}
		if after := binlogState(t, root); after != before {
			t.Errorf("run %d: the binary log moved from %s to %s: the users' creation was logged", round, before, after)
		}
	}
	// The probes' OS user logs in over the socket without a privilege,
	// rather than being refused (and logged) at every probe.
	var plugin string
	if err := root.QueryRow("SELECT plugin FROM mysql.user WHERE user = 'mysql' AND host = 'localhost'").Scan(&plugin); err != nil || plugin != "unix_socket" {
		t.Errorf("probe account mysql@localhost: plugin %q (%v), want unix_socket", plugin, err)
	}
	if got := grantsOfAt(t, root, "mysql", "localhost"); len(got) != 1 || got[0] != "USAGE" {
		t.Errorf("probe account mysql@localhost privileges %q, want USAGE only", got)
	}
	// The passwords, odd characters and all, are the Secret's.
	for user, pw := range map[string]string{mysqltest.AgentUser: agentPW, mysqltest.ReplUser: replPW} {
		db := srv.db(t, user, pw, false)
		if err := db.PingContext(ctx); err != nil {
			t.Errorf("logging in as %s over TCP with the Secret's password: %v", user, err)
		}
		db.Close()
	}
	conn.Close()
	root.Close()

	// The probes' command, on this server's socket: alive, also for a user
	// the server refuses (the probe runs as uid 999 without credentials).
	probe := func(extra ...string) (string, error) {
		cmd := server.LivenessProbe.Exec.Command
		args := slices.Clone(cmd[1:])
		for i, a := range args {
			if strings.HasPrefix(a, "--socket=") {
				args[i] = "--socket=" + srv.socket
			}
		}
		args = slices.Insert(args, len(args)-1, extra...)
		out, err := exec.Command(cmd[0], args...).CombinedOutput()
		return string(out), err
	}
	if out, err := probe(); err != nil {
		t.Errorf("probe against the running server: %v\n%s", err, out)
	}
	if out, err := probe("--user=nosuchuser"); err != nil {
		t.Errorf("probe as an unknown user against the running server: %v\n%s", err, out)
	}
	srv.stop()
	if out, err := probe(); err == nil {
		t.Errorf("probe against the stopped server succeeded:\n%s", out)
	}
}

// grantsOf returns the privileges user@'%' holds, sorted: on *.* by name,
// on a schema as "PRIV ON `schema`.*".
func grantsOf(t *testing.T, db *sql.DB, user string) []string {
	t.Helper()
	return grantsOfAt(t, db, user, "%")
}

// grantsOfAt is grantsOf for user@host.
func grantsOfAt(t *testing.T, db *sql.DB, user, host string) []string {
	t.Helper()
	rows, err := db.Query("SHOW GRANTS FOR '" + user + "'@'" + host + "'")
	if err != nil {
		t.Fatalf("SHOW GRANTS FOR %s: %v", user, err)
	}
	defer rows.Close()
	var privs []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		list, rest, ok := strings.Cut(strings.TrimPrefix(g, "GRANT "), " ON ")
		scope, _, _ := strings.Cut(rest, " TO ")
		if !ok || (scope != "*.*" && !strings.HasSuffix(scope, ".*")) {
			t.Fatalf("unexpected grant %q", g)
		}
		for _, p := range strings.Split(list, ", ") {
			if scope != "*.*" {
				p += " ON " + scope
			}
			privs = append(privs, p)
		}
	}
	slices.Sort(privs)
	return privs
}

// binlogState is the binary log's end position and GTID position.
func binlogState(t *testing.T, db *sql.DB) string {
	t.Helper()
	var file, pos, doDB, ignoreDB, gtid string
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
		t.Fatalf("SHOW MASTER STATUS: %v", err)
	}
	if err := db.QueryRow("SELECT @@GLOBAL.gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%s gtid %q", file, pos, gtid)
}

// rootConn pins one connection, for statements that set session state.
func rootConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// deployedServer is a mariadbd started with a deploy/ snippet as its only
// option file, on a copy of the test template data directory (mysqltest's,
// which holds the users the integration tests use).
type deployedServer struct {
	dir, socket string
	port        int
	cmd         *exec.Cmd
	done        chan struct{}
}

func startMariaDB(t *testing.T, cnf string) *deployedServer {
	t.Helper()
	template, err := mysqltest.PrepareTemplate()
	if err != nil {
		t.Fatalf("preparing the MariaDB template: %v", err)
	}
	dir, err := os.MkdirTemp("", "deploytest-") // short: the socket path must fit 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("cp", "-a", template, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		t.Fatalf("copying the template: %v: %s", err, out)
	}
	cnfPath := filepath.Join(dir, "mysqlha.cnf")
	if err := os.WriteFile(cnfPath, []byte(cnf), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &deployedServer{dir: dir, socket: filepath.Join(dir, "s.sock"), port: port, done: make(chan struct{})}
	// The snippet is the only option file. The command line overrides what
	// must differ on a shared test machine (paths, address, port) and keeps
	// the template's small InnoDB sizes.
	s.cmd = exec.Command(mysqltest.MariadbdPath, "--defaults-file="+cnfPath, "--user=root",
		"--datadir="+filepath.Join(dir, "data"), "--socket="+s.socket, "--pid-file="+filepath.Join(dir, "p.pid"),
		"--log-error="+filepath.Join(dir, "error.log"), "--bind-address=127.0.0.1", "--port="+strconv.Itoa(port),
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M", "--performance-schema=OFF")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", mysqltest.MariadbdPath, err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := s.open("root", "", true)
		if err == nil {
			err = db.Ping()
			db.Close()
			if err == nil {
				return s
			}
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("mariadbd exited at start-up with the deploy/ snippet:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mariadbd not ready after 30 s: %v", err)
		}
	}
}

func (s *deployedServer) open(user, password string, socket bool) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd = user, password
	c.Net, c.Addr = "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	if socket {
		c.Net, c.Addr = "unix", s.socket
	}
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 10*time.Second, 10*time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func (s *deployedServer) db(t *testing.T, user, password string, socket bool) *sql.DB {
	t.Helper()
	db, err := s.open(user, password, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// stop shuts the server down (SIGTERM, SIGKILL after 20 s) and waits.
func (s *deployedServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}
