package images

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// rootfsServer is the image's entrypoint running in an extracted rootfs,
// without a container runtime: chroot in new mount and PID namespaces, so
// that /proc is the namespace's and killing the namespace's init ends
// everything. The init is a root sh, not the entrypoint: unshare
// --kill-child sets the parent-death signal, which a uid change (chroot
// --userspec) clears; sh keeps it, so the namespace dies with unshare, and
// unshare with the test binary (Pdeathsig), even on a test timeout.
type rootfsServer struct {
	t    *testing.T
	args []string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startRootfs runs /usr/local/bin/docker-entrypoint.sh args in root as
// userspec ("999:999", or "" for root), with env added to the image's.
func startRootfs(t *testing.T, root, userspec string, imageEnv, env, args []string) *rootfsServer {
	t.Helper()
	unshare, err := lookTool("unshare")
	if err != nil {
		t.Fatal(err)
	}
	chroot, err := lookTool("chroot")
	if err != nil {
		t.Fatal(err)
	}
	chrootArgs := []string{chroot}
	if userspec != "" {
		chrootArgs = append(chrootArgs, "--userspec="+userspec)
	}
	// /dev comes from the host, bound in the private mount namespace only.
	script := `root=$1; shift; mount --bind /dev "$root/dev" || exit 1; "$@" & wait $!`
	cmdArgs := append([]string{"--mount", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc=" + filepath.Join(root, "proc"),
		"/bin/sh", "-c", script, "sh", root}, chrootArgs...)
	cmdArgs = append(cmdArgs, root, "/usr/local/bin/docker-entrypoint.sh")
	cmdArgs = append(cmdArgs, args...)
	logf, err := os.CreateTemp(t.TempDir(), "entrypoint-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, cmdArgs...)
	cmd.Env = append(append([]string{}, imageEnv...), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &rootfsServer{t: t, args: args, cmd: cmd, log: logf.Name(), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		cmd.Process.Kill() // --kill-child takes the namespace down
		<-s.done
		if t.Failed() {
			s.dumpLog()
		}
	})
	return s
}

func (s *rootfsServer) dumpLog() {
	b, _ := os.ReadFile(s.log)
	s.t.Logf("output of the entrypoint with %q:\n%s", s.args, lastLines(b, 80))
}

func (s *rootfsServer) output() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// serverPID is the host PID of the process the namespace's init started:
// the entrypoint, then (exec) mariadbd.
func (s *rootfsServer) serverPID() int {
	s.t.Helper()
	return onlyChild(s.t, onlyChild(s.t, s.cmd.Process.Pid))
}

func onlyChild(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("children of %d: %q, want one", pid, b)
	}
	return child
}

// waitSQL waits (two minutes at most) until the server takes connections
// as user on addr; a refused login fails at once.
func (s *rootfsServer) waitSQL(ctx context.Context, user, password, addr string) *sql.DB {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", addr
	cfg.Timeout = time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { db.Close() })
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return db
		}
		if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == 1045 {
			s.t.Fatalf("%s cannot log in on %s: %v", user, addr, err)
		}
		select {
		case exit := <-s.done:
			s.done <- exit
			s.t.Fatalf("the entrypoint exited (%v) before %s could connect: %v", exit, user, err)
		case <-ctx.Done():
			s.t.Fatalf("%s could not connect to %s: %v", user, addr, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM to mariadbd and waits for a clean exit.
func (s *rootfsServer) stop(timeout time.Duration) {
	s.t.Helper()
	if err := syscall.Kill(s.serverPID(), syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			s.t.Fatalf("mariadbd exited with %v after SIGTERM", err)
		}
	case <-time.After(timeout):
		s.t.Fatalf("mariadbd still running %v after SIGTERM", timeout)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func queryString(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	var v sql.NullString
	if err := db.QueryRow(q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v.String
}

// The entrypoint, run as deploy/statefulset.yaml runs it: the same args,
// MARIADB_ROOT_PASSWORD, a datadir owned by root with group 999 (a volume
// with fsGroup 999), a conf.d snippet from an "init container" and init
// scripts of each kind. Then a restart on the initialised datadir, as root
// (no securityContext), which must switch to mysql and skip the init.
func TestMariaDBEntrypoint(t *testing.T) {
	requireBuild(t, "unshare", "chroot", "tar")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	img, err := testCache(t).MariaDB(ctx)
	if err != nil {
		t.Fatalf("building the MariaDB image: %v", err)
	}
	image, cf := loadImage(t, img)
	root := t.TempDir()
	start := time.Now()
	extract(t, image, root)
	t.Logf("extracted %s in %.1fs", img.Ref, time.Since(start).Seconds())

	datadir := filepath.Join(root, "var/lib/mysql")
	if err := os.Chown(datadir, 0, MariaDBUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(datadir, os.ModeSetgid|0o770); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	writeFile := func(rel, body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("etc/mysql/conf.d/90-mysqlha.cnf", fmt.Sprintf("[mysqld]\nserver_id=4242\nport=%d\n", port), 0o644)
	writeFile("docker-entrypoint-initdb.d/10-users.sql",
		"CREATE USER 'probe'@'%' IDENTIFIED BY 'probe-pw';\nGRANT SELECT ON *.* TO 'probe'@'%';\n", 0o644)
	writeFile("docker-entrypoint-initdb.d/20-sourced.sh",
		"[ -n \"$DATADIR\" ] && [ -S \"$SOCKET\" ] || mysql_error \"no DATADIR/SOCKET in a sourced script\"\n"+
			"docker_process_sql --database=mysql <<<'CREATE DATABASE sourced_ok'\n", 0o644)
	writeFile("docker-entrypoint-initdb.d/30-executed.sh",
		"#!/bin/bash\nset -e\nMYSQL_PWD=\"$MARIADB_ROOT_PASSWORD\" mariadb -uroot --socket=/run/mysqld/mysqld.sock -e 'CREATE DATABASE executed_ok'\n", 0o755)
	args := []string{"mariadbd", "--log-bin=mysql-bin", "--log-slave-updates", "--gtid-strict-mode=1", "--binlog-format=ROW", "--read-only=1"}
	const rootPassword = `r'o\ot "pw"`
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	// What the entrypoint refuses, before anything is written to the datadir.
	for _, tc := range []struct {
		name, want string
		env, args  []string
	}{
		{"no password setting", "password option is not specified", nil, args},
		{"a bad server option", "failed while attempting to check config",
			[]string{"MARIADB_ROOT_PASSWORD=x"}, append(slices.Clone(args), "--no-such-option=1")},
		{"an unsupported variable", "MARIADB_REPLICATION_USER is not supported",
			[]string{"MARIADB_ROOT_PASSWORD=x", "MARIADB_REPLICATION_USER=repl"}, args},
	} {
		s := startRootfs(t, root, "999:999", cf.Config.Env, tc.env, tc.args)
		select {
		case err := <-s.done:
			s.done <- err
			if err == nil || !strings.Contains(s.output(), tc.want) {
				t.Errorf("with %s: exit %v, want an error saying %q; output:\n%s", tc.name, err, tc.want, lastLines([]byte(s.output()), 10))
			}
		case <-time.After(time.Minute):
			t.Fatalf("with %s: the entrypoint still runs after a minute", tc.name)
		}
	}
	// Another command is exec'd as is; sourcing the script gives its
	// functions; MARIADB_ROOT_PASSWORD_FILE fills MARIADB_ROOT_PASSWORD.
	writeFile("root-pw", "from-file\n", 0o644)
	sourced := startRootfs(t, root, "999:999", cf.Config.Env, []string{"MARIADB_ROOT_PASSWORD_FILE=/root-pw"}, []string{"bash", "-c",
		`. /usr/local/bin/docker-entrypoint.sh && docker_setup_env mariadbd && echo "pw=$MARIADB_ROOT_PASSWORD/$MYSQL_ROOT_PASSWORD datadir=$DATADIR"`})
	select {
	case err := <-sourced.done:
		if want := "pw=from-file/from-file datadir=/var/lib/mysql"; err != nil || !strings.Contains(sourced.output(), want) {
			t.Errorf("sourcing the entrypoint: exit %v, output %q, want %q", err, sourced.output(), want)
		}
		sourced.done <- err
	case <-time.After(time.Minute):
		t.Fatal("bash -c ... still runs after a minute")
	}
	if left, _ := os.ReadDir(datadir); len(left) > 0 {
		t.Fatalf("the refused starts wrote %d entries in the datadir", len(left))
	}

	start = time.Now()
	srv := startRootfs(t, root, "999:999", cf.Config.Env, []string{"MARIADB_ROOT_PASSWORD=" + rootPassword}, args)
	db := srv.waitSQL(ctx, "root", rootPassword, addr)
	t.Logf("fresh datadir: root connected over TCP after %.1fs", time.Since(start).Seconds())

	for q, want := range map[string]string{
		"SELECT COUNT(*) FROM mysql.user WHERE User='probe' AND Host='%'":                                    "1",
		"SELECT COUNT(*) FROM mysql.user WHERE User='root' AND Host='%'":                                     "1",
		"SELECT COUNT(*) FROM mysql.user WHERE User='root' AND Host IN ('127.0.0.1','::1')":                  "0",
		"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name IN ('sourced_ok','executed_ok')": "2",
		"SELECT @@server_id":                            "4242", // the conf.d snippet wins
		"SELECT @@read_only":                            "1",    // the args reach mariadbd
		"SELECT @@log_bin":                              "1",
		"SELECT @@gtid_strict_mode":                     "1",
		"SELECT @@skip_name_resolve":                    "1",
		"SELECT @@datadir":                              "/var/lib/mysql/",
		"SELECT @@socket":                               "/run/mysqld/mysqld.sock",
		"SELECT COUNT(*) > 0 FROM mysql.time_zone_name": "1",
	} {
		if got := queryString(t, db, q); got != want {
			t.Errorf("%s = %q, want %q", q, got, want)
		}
	}
	if got := queryString(t, db, "SELECT @@bind_address"); got == "127.0.0.1" {
		t.Errorf("bind_address %q: Debian's default is not commented out, peers could not connect", got)
	}
	t.Logf("after init: gtid_binlog_pos=%q (the init scripts' statements are binlogged, as in the official image)",
		queryString(t, db, "SELECT @@gtid_binlog_pos"))
	srv.waitSQL(ctx, "probe", "probe-pw", addr)

	// The probes' client, on the socket, as mysql.
	chroot, err := lookTool("chroot")
	if err != nil {
		t.Fatal(err)
	}
	ping := exec.Command(chroot, "--userspec=999:999", root, "/usr/bin/mariadb-admin", "-uroot", "--socket=/run/mysqld/mysqld.sock", "ping")
	ping.Env = append(append([]string{}, cf.Config.Env...), "MYSQL_PWD="+rootPassword)
	if out, err := ping.CombinedOutput(); err != nil || !strings.Contains(string(out), "mysqld is alive") {
		t.Errorf("mariadb-admin ping: %v\n%s", err, out)
	}
	err = filepath.Walk(datadir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == datadir {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != MariaDBUID {
			return fmt.Errorf("%s owned by uid %d, want %d", p, st.Uid, MariaDBUID)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	start = time.Now()
	srv.stop(time.Minute)
	t.Logf("mariadbd stopped on SIGTERM in %.1fs", time.Since(start).Seconds())
	if out := srv.output(); !strings.Contains(out, "MariaDB init process done") {
		t.Errorf("no init in the entrypoint's output")
	}

	// Restart as root on the initialised datadir, without any password env.
	start = time.Now()
	again := startRootfs(t, root, "", cf.Config.Env, nil, args)
	again.waitSQL(ctx, "probe", "probe-pw", addr)
	t.Logf("restart as root on the initialised datadir: connected after %.1fs", time.Since(start).Seconds())
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", again.serverPID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && (f[0] == "Uid:" || f[0] == "Gid:") && f[1] != strconv.Itoa(MariaDBUID) {
			t.Errorf("mariadbd started as root runs with %s, want %d", l, MariaDBUID)
		}
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Name:" && f[1] != "mariadbd" {
			t.Errorf("the entrypoint's process is %s, want mariadbd (exec'd)", f[1])
		}
	}
	if out := again.output(); strings.Contains(out, "Initializing database files") || !strings.Contains(out, "Switching to dedicated user 'mysql'") {
		t.Errorf("restart as root: want no init and a switch to mysql, got:\n%s", lastLines([]byte(out), 30))
	}
	again.stop(time.Minute)
}
