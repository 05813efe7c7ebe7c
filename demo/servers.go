package demo

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// checkPorts fails early, naming the port, when a fixed port is taken.
func (d *demo) checkPorts() error {
	type fixedPort struct {
		what string
		port int
	}
	var fixed []fixedPort
	if d.cfg.Backend == BackendEtcd {
		fixed = append(fixed, fixedPort{"etcd client port", d.cfg.EtcdPort})
	}
	for i := range d.cfg.Members {
		fixed = append(fixed, fixedPort{"MySQL port", d.port(d.cfg.MySQLPort, i)}, fixedPort{"agent API port", d.port(d.cfg.APIPort, i)})
	}
	for _, f := range fixed {
		if f.port == 0 {
			continue // picked when it is needed
		}
		if _, err := bindPort(f.port); err != nil {
			return fmt.Errorf("%s: %w", f.what, err)
		}
	}
	return nil
}

// bindPort checks that 127.0.0.1:port can be bound, so that a port in use
// fails with a message naming it rather than deep inside a child's log, and
// returns it; port 0 picks one that was free a moment ago.
func bindPort(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	switch {
	case err != nil && port == 0:
		return 0, fmt.Errorf("no free port on 127.0.0.1: %w", err)
	case err != nil:
		return 0, fmt.Errorf("127.0.0.1:%d is in use (by another server?); choose other ports, e.g. make demo DEMO_FLAGS=\"--etcd-port=12379 --mysql-port=13307 --api-port=18008\": %w", port, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// versionRE picks the version out of `mariadbd --version`.
var versionRE = regexp.MustCompile(`Ver\s+(\S+)`)

// startMariaDB checks that mariadbd is installed, printing its version, and
// prepares the template data dir the servers' data dirs are copied from.
func (d *demo) startMariaDB() error {
	d.p.start("checking MariaDB")
	if _, err := exec.LookPath(mysqltest.MariadbdPath); err != nil {
		// Debian puts mariadbd in /usr/sbin, which a non-login PATH may lack.
		if _, serr := os.Stat("/usr/sbin/mariadbd"); serr == nil && mysqltest.MariadbdPath == "mariadbd" {
			mysqltest.MariadbdPath = "/usr/sbin/mariadbd"
		} else {
			return fmt.Errorf("mariadbd not found: run `make demo` (it installs mariadb-server with apt-get) or apt-get install mariadb-server")
		}
	}
	path, _ := exec.LookPath(mysqltest.MariadbdPath)
	out, err := exec.Command(mysqltest.MariadbdPath, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", mysqltest.MariadbdPath, err)
	}
	version := strings.TrimSpace(string(out))
	if m := versionRE.FindStringSubmatch(version); m != nil {
		version = m[1]
	}
	d.p.done("%s %s", path, version)

	d.p.start("preparing the MariaDB template data dir (mariadb-install-db, cached after the first run)")
	if _, err := mysqltest.PrepareTemplate(); err != nil {
		return err
	}
	d.p.done("ready")
	return nil
}

// port is member i's port counted from base; 0 (pick a free one) stays 0.
func (d *demo) port(base, i int) int {
	if base == 0 {
		return 0
	}
	return base + i
}

// startServers starts the members' MariaDB servers in parallel, writes the
// agents' password files and opens each server's application user pool.
func (d *demo) startServers() error {
	n := d.cfg.Members
	d.p.start("starting %d MariaDB servers (read_only=ON in their config, as a production my.cnf must)", n)
	servers := make([]*mysqltest.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = mysqltest.Launch(filepath.Join(d.cfg.Dir, fmt.Sprintf("db%d", i+1)), i+1,
				mysqltest.Options{Port: d.port(d.cfg.MySQLPort, i), ExtraArgs: []string{"--read-only=ON"}})
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			d.members = append(d.members, &member{name: s.Name, server: s})
			d.track(s.Pid(), "mariadbd "+s.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	secrets := filepath.Join(d.cfg.Dir, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		return err
	}
	d.secrets.agent, d.secrets.repl = filepath.Join(secrets, "agent-password"), filepath.Join(secrets, "repl-password")
	if err := os.WriteFile(d.secrets.agent, []byte(mysqltest.AgentPassword+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(d.secrets.repl, []byte(mysqltest.ReplPassword+"\n"), 0o600); err != nil {
		return err
	}
	// The agents' API serves only callers with this token (--api-token-file).
	d.secrets.apiToken = filepath.Join(secrets, "api-token")
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return err
	}
	if err := os.WriteFile(d.secrets.apiToken, []byte(hex.EncodeToString(token)+"\n"), 0o600); err != nil {
		return err
	}
	var where []string
	for _, m := range d.members {
		m.apiToken = hex.EncodeToString(token)
		db, err := openApp(m.server)
		if err != nil {
			return err
		}
		m.app = db
		where = append(where, m.name+" "+m.addr())
	}
	d.p.done("%s", strings.Join(where, ", "))
	return nil
}

// startAgents starts one agent per member, on the API port counted from
// Config.APIPort, each logging to logs/<member>-agent.log in the work dir.
func (d *demo) startAgents() error {
	d.p.start("starting %d agents (%s --dcs=%s)", len(d.members), displayPath(filepath.Join(d.cfg.BinDir, "mysqlha-agent")), d.cfg.Backend)
	logs := filepath.Join(d.cfg.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	var where []string
	for i, m := range d.members {
		port, err := bindPort(d.port(d.cfg.APIPort, i))
		if err != nil {
			return err
		}
		m.listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		m.apiURL = "http://" + m.listen
		m.logPath = filepath.Join(logs, m.name+"-agent.log")
		m.args = append([]string{filepath.Join(d.cfg.BinDir, "mysqlha-agent")}, d.be.agentArgs(m)...)
		m.args = append(m.args,
			"--cluster="+d.cfg.Cluster, "--name="+m.name,
			"--mysql-local-addr="+m.addr(), "--advertise-mysql-addr="+m.addr(),
			"--mysql-password-file="+d.secrets.agent, "--replication-password-file="+d.secrets.repl,
			"--listen="+m.listen, "--advertise-api-url="+m.apiURL, "--api-token-file="+d.secrets.apiToken,
		)
		pid, err := m.startAgent()
		if err != nil {
			return err
		}
		d.track(pid, "mysqlha-agent "+m.name)
		where = append(where, fmt.Sprintf("%s %s", m.name, m.apiURL))
	}
	d.p.done("%s; logs in %s", strings.Join(where, ", "), logs)
	return nil
}
