package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mysqlha/mysqlha/internal/apiauth"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// An agent whose start-up fails after flag parsing (here: an etcd CA file
// that does not exist, as a broken Secret mount leaves it) must still have
// fenced its mysqld: it fences first, before any step that can fail. Real
// MariaDB, started writable.
func TestStartupFailureLeavesMySQLFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB")
	}
	s := mysqltest.Start(t, 1)[0]
	root := s.RootDB(t)
	if _, err := root.Exec("SET GLOBAL read_only = OFF"); err != nil {
		t.Fatal(err)
	}
	err := run([]string{
		"--cluster=c", "--name=db1", "--dcs=etcd", "--etcd-endpoints=https://127.0.0.1:1",
		"--etcd-cacert=" + filepath.Join(t.TempDir(), "missing-ca.pem"),
		"--mysql-local-addr=" + s.Addr(), "--mysql-user=" + mysqltest.AgentUser,
		"--mysql-password-file=" + s.PasswordFile(t, mysqltest.AgentPassword),
		"--listen=127.0.0.1:0", "--log-level=error", "--api-insecure",
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "missing-ca.pem") {
		t.Fatalf("run with a missing etcd CA file: %v, want an error naming it", err)
	}
	var ro bool
	if err := root.QueryRow("SELECT @@global.read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	if !ro {
		t.Fatal("the agent failed to start and left its mysqld writable")
	}
}

// A mysqld that is down at start-up does not stop the agent from going on
// (here to the same failure): a down server takes no writes.
func TestStartupFenceToleratesDownMySQL(t *testing.T) {
	err := run([]string{
		"--cluster=c", "--name=db1", "--dcs=etcd", "--etcd-endpoints=https://127.0.0.1:1",
		"--etcd-cacert=" + filepath.Join(t.TempDir(), "missing-ca.pem"),
		"--mysql-local-addr=127.0.0.1:1", "--listen=127.0.0.1:0", "--log-level=error", "--api-insecure",
		"--mysql-password-file=" + writeFile(t, "agent-password", "pw"),
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "missing-ca.pem") {
		t.Fatalf("run with mysqld down: %v, want the DCS error, not a fencing one", err)
	}
}

// An API that could authenticate nobody, or a token file that is not
// there, stops the start with the way out named.
func TestStartupNeedsAPIAuthentication(t *testing.T) {
	base := []string{"--cluster=c", "--name=db1", "--dcs=etcd", "--etcd-endpoints=http://127.0.0.1:1",
		"--mysql-local-addr=127.0.0.1:1", "--listen=127.0.0.1:0", "--log-level=error"}
	if err := run(base, io.Discard); !errors.Is(err, apiauth.ErrNoAuth) {
		t.Errorf("no token, no client CA: %v, want ErrNoAuth", err)
	}
	missing := filepath.Join(t.TempDir(), "api-token")
	if err := run(append(base, "--api-token-file="+missing), io.Discard); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing token file: %v, want an error naming %s", err, missing)
	}
}

// A password file that is not given (over TCP) or cannot be read stops the
// start, naming it, instead of an agent that fails every login.
func TestStartupNeedsAReadablePasswordFile(t *testing.T) {
	base := []string{"--cluster=c", "--name=db1", "--dcs=etcd", "--etcd-endpoints=http://127.0.0.1:1",
		"--mysql-local-addr=127.0.0.1:1", "--listen=127.0.0.1:0", "--log-level=error", "--api-insecure"}
	if err := run(base, io.Discard); err == nil || !strings.Contains(err.Error(), "--mysql-password-file is required") {
		t.Errorf("no password file: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "agent-password")
	if err := run(append(base, "--mysql-password-file="+missing), io.Discard); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing password file: %v, want an error naming %s", err, missing)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
