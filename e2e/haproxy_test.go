package e2e

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// The world outside Kubernetes: Debian's HAProxy runs the README's example
// (docs/haproxy.cfg, its addresses replaced) in front of a real cluster,
// and every agent runs a role change hook (--on-role-change). The primary
// port reaches the primary and only it, the replica port only replicas,
// and after a switchover the primary port reaches the new primary; each
// hook was told its member's roles, the last one being the member's role.
func TestHAProxyAndRoleChangeHook(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		haproxy = "/usr/sbin/haproxy"
	}
	if _, err := os.Stat(haproxy); err != nil {
		t.Fatalf("haproxy not found: make deps installs Debian's haproxy (%v)", err)
	}
	hooks := t.TempDir()
	hook := filepath.Join(hooks, "on-role-change.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho \"$1\" >> "+hooks+"/\"$3\".roles\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := NewCluster(t, Options{AgentArgs: []string{"--on-role-change=" + hook}})
	old := c.Bootstrap()
	target := c.Others(old)[0]

	cfg, primaryAddr, replicasAddr := haproxyConfig(t, c)
	cfgPath := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c rejects the example:\n%s\n%s", out, cfg)
	}
	p, err := localproc.StartLogged([]string{haproxy, "-db", "-f", cfgPath}, filepath.Join(c.logDir, "haproxy.log"), "haproxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(syscall.SIGTERM, 5*time.Second) })

	primary, replicas := through(t, primaryAddr), through(t, replicasAddr)
	waitReaches(t, primary, "the primary port", old)
	// Past HAProxy's start-up (every server up until checked), the replica
	// port reaches each replica, and never the primary, 20 times in a row.
	seen, run := map[string]bool{}, 0
	for deadline := time.Now().Add(20 * time.Second); run < 20 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		name, err := reached(c, replicas)
		if err != nil || name == old.Name {
			seen, run = map[string]bool{}, 0
			continue
		}
		seen[name] = true
		run++
	}
	if run < 20 {
		t.Errorf("the replica port did not settle on the replicas in 20 s (it kept reaching the primary %s, or failing)", old.Name)
	}
	for _, m := range c.Others(old) {
		if !seen[m.Name] {
			t.Errorf("the replica port never reached %s in 20 connections (reached %v)", m.Name, seen)
		}
	}
	if _, err := primary.Exec("CREATE TABLE IF NOT EXISTS via_haproxy (id INT PRIMARY KEY)"); err != nil {
		t.Fatalf("a write through the primary port: %v", err)
	}

	c.MustCtl("switchover", "--to", target.Name, "--force", "--wait")
	began := time.Now()
	waitReaches(t, primary, "the primary port after the switchover", target)
	t.Logf("the primary port reached the new primary %s %v after agentctl switchover --wait returned", target.Name, ms(time.Since(began)))
	if _, err := primary.Exec("INSERT INTO via_haproxy VALUES (1)"); err != nil {
		t.Errorf("a write through the primary port after the switchover: %v", err)
	}

	// The hooks run in the background: give the last ones a moment.
	want := map[string]string{old.Name: "replica", target.Name: "primary"}
	for _, m := range c.Others(old, target) {
		want[m.Name] = "replica"
	}
	for name, last := range want {
		var roles []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			b, _ := os.ReadFile(filepath.Join(hooks, name+".roles"))
			if roles = strings.Fields(string(b)); len(roles) > 0 && roles[len(roles)-1] == last {
				break
			}
		}
		if len(roles) == 0 || roles[len(roles)-1] != last {
			t.Errorf("%s's hook was told %q, want %s last", name, roles, last)
		}
		if name == old.Name && (len(roles) < 2 || roles[0] != "primary") {
			t.Errorf("the old primary %s's hook was told %q, want primary first", name, roles)
		}
	}
}

// haproxyConfig is docs/haproxy.cfg with its frontends bound to free
// loopback ports and its i-th server line of each backend pointing at
// member i's mysqld and agent.
func haproxyConfig(t *testing.T, c *Cluster) (cfg, primaryAddr, replicasAddr string) {
	t.Helper()
	raw, err := os.ReadFile("../docs/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfg = string(raw)
	addrs := map[string]string{}
	for _, bind := range []string{":3306", ":3307"} {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addrs[bind] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if !strings.Contains(cfg, "bind "+bind+"\n") {
			t.Fatalf("docs/haproxy.cfg has no \"bind %s\"", bind)
		}
		cfg = strings.Replace(cfg, "bind "+bind+"\n", "bind "+addrs[bind]+"\n", 1)
	}
	server := regexp.MustCompile(`(?m)^(\s+server )db(\d) \S+ check port 8008$`)
	n := 0
	cfg = server.ReplaceAllStringFunc(cfg, func(line string) string {
		i, _ := strconv.Atoi(server.FindStringSubmatch(line)[2])
		if i < 1 || i > len(c.Members) {
			t.Fatalf("docs/haproxy.cfg: %q names no member of a %d-member cluster", line, len(c.Members))
		}
		m := c.Members[i-1]
		api := strings.TrimPrefix(m.APIURL, "http://")
		_, apiPort, _ := net.SplitHostPort(api)
		n++
		return fmt.Sprintf("%s%s %s check port %s", server.FindStringSubmatch(line)[1], m.Name, m.Server.Addr(), apiPort)
	})
	if n != 2*len(c.Members) {
		t.Fatalf("docs/haproxy.cfg: %d server lines replaced, want %d (one per member in each backend)", n, 2*len(c.Members))
	}
	return cfg, addrs[":3306"], addrs[":3307"]
}

// through is a pool for the application user through HAProxy that opens a
// new connection for every query, so that each asks HAProxy afresh.
func through(t *testing.T, addr string) *sql.DB {
	db := openAppAt(t, addr)
	db.SetMaxIdleConns(0)
	return db
}

// reached names the member whose mysqld answered a query through db.
func reached(c *Cluster, db *sql.DB) (string, error) {
	var port int
	if err := db.QueryRow("SELECT @@port").Scan(&port); err != nil {
		return "", err
	}
	for _, m := range c.Members {
		if strings.HasSuffix(m.Server.Addr(), ":"+strconv.Itoa(port)) {
			return m.Name, nil
		}
	}
	return "", fmt.Errorf("port %d is no member's", port)
}

// waitReaches waits up to 10 s until db reaches want 10 times in a row
// (HAProxy starts every server up, until its first check), and then checks
// that it keeps reaching want and nothing else.
func waitReaches(t *testing.T, db *sql.DB, what string, want *Member) {
	t.Helper()
	var got string
	var err error
	for run, deadline := 0, time.Now().Add(10*time.Second); run < 10; time.Sleep(50 * time.Millisecond) {
		if got, err = reached(want.c, db); got == want.Name {
			run++
		} else {
			run = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s reached %q (%v), want %s", what, got, err, want.Name)
		}
	}
	for i := 0; i < 20; i++ {
		if got, err := reached(want.c, db); got != want.Name {
			t.Fatalf("%s reached %q (%v) after reaching %s 10 times in a row", what, got, err, want.Name)
		}
	}
}
