// Package demo is mysqlha's front door: a supervisor that starts a local
// 3-member MariaDB cluster managed by real mysqlha agents on a DCS it also
// starts (an embedded etcd, or a real kube-apiserver), shows its status
// through the real agentctl, runs a failover drill (kill -9 the primary's
// mysqld and agent, time the new primary's first accepted write, restart the
// old member and watch it rejoin as a replica), and then either keeps the
// cluster running for the user to try agentctl (interactive) or checks every
// step and stops (CI).
//
// It drives the product only through its public surfaces: the agent and
// agentctl binaries and their flags, the agents' GET /status, the MySQL
// protocol as the application user, and (Kubernetes mode) the API objects.
//
// Guarantees: every process it starts is in its own process group and dies
// with the supervisor (parent-death signal SIGKILL), so even a kill -9 of the
// supervisor leaves nothing running; on a normal exit it stops agents,
// servers and the DCS, checks by pid that none is left, and removes its work
// dir. Nothing outside the work dir is written except MariaDB's template
// data directory, cached in the system temp dir by mysqltest.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/etcd/etcdtest"
	"github.com/mysqlha/mysqlha/internal/localproc"
	"github.com/mysqlha/mysqlha/mysqlctl/mysqltest"
)

// Backends.
const (
	BackendEtcd       = "etcd"
	BackendKubernetes = "kubernetes"
)

// Config is the demo's configuration; cmd/demo fills it from flags.
type Config struct {
	// Dir is the work dir: data, sockets, logs, the pid file. Removed at exit.
	Dir string
	// BinDir holds mysqlha-agent and agentctl.
	BinDir string
	// Cluster is the cluster name.
	Cluster string
	// Members is the number of members (3 when zero).
	Members int
	// Backend is BackendEtcd or BackendKubernetes.
	Backend string
	// CI runs non-interactively: every step is checked, then everything stops.
	CI bool
	// Keep leaves the work dir (logs) in place at exit.
	Keep bool
	// EtcdPort is etcd's client port; MySQLPort and APIPort are the first
	// member's ports, the others use the following ones. 0 picks free ports
	// (tests).
	EtcdPort, MySQLPort, APIPort int
	// KubeBinDir holds kube-apiserver and kube-controller-manager.
	KubeBinDir string
	// Out receives the demo's narrative.
	Out io.Writer
}

// Timeouts of the checked steps. They are generous multiples of what the
// steps take with the default timings (ttl 5 s, loop_wait 1 s).
const (
	bootstrapTimeout = 60 * time.Second
	failoverTimeout  = 60 * time.Second
	rejoinTimeout    = 60 * time.Second
	pollEvery        = 100 * time.Millisecond
)

// backend is the DCS the agents use.
type backend interface {
	// prepare creates what the members need before their agents start
	// (Kubernetes: the Pods).
	prepare(ctx context.Context, p *progress, ms []*member) error
	// agentArgs are the DCS flags of m's agent.
	agentArgs(m *member) []string
	// ctlArgs are agentctl's global DCS flags.
	ctlArgs() []string
	// env is the environment that makes plain `agentctl` reach the cluster.
	env() []string
	// show prints the backend's view of the roles (Kubernetes: the Lease,
	// pod labels and the primary Service's endpoints); when wantPrimary is
	// set it first waits up to a few seconds for them to name it.
	show(ctx context.Context, p *progress, wantPrimary string) error
	// live is a short summary of the backend's view for the drill's
	// transition lines; "" when it has nothing to add.
	live(ctx context.Context) string
	// routed reports whether traffic for the primary reaches primary
	// (Kubernetes: its Service's endpoints); always true for etcd.
	routed(ctx context.Context, primary string) bool
	// routedNote completes the drill's summary ("" for etcd).
	routedNote() string
	// tryLines are extra commands for the user to try.
	tryLines() []string
	stop()
}

type demo struct {
	cfg     Config
	p       *progress
	be      backend
	members []*member
	secrets struct{ agent, repl string }

	// pids of every process started, for the check that none is left.
	pidMu sync.Mutex
	pids  map[int]string
}

// Run runs the demo until it is done (CI) or ctx is cancelled (interactive),
// then stops everything and removes the work dir. A cancelled ctx is a clean
// stop, not an error.
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "demo"
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Backend == "" {
		cfg.Backend = BackendEtcd
	}
	if cfg.Backend != BackendEtcd && cfg.Backend != BackendKubernetes {
		return fmt.Errorf("backend %q: want %s or %s", cfg.Backend, BackendEtcd, BackendKubernetes)
	}
	if cfg.Dir == "" {
		return errors.New("no work dir")
	}
	// Absolute: children run in other directories, and the leak check
	// matches the work dir in command lines.
	for _, p := range []*string{&cfg.Dir, &cfg.BinDir, &cfg.KubeBinDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	d := &demo{cfg: cfg, p: newProgress(cfg.Out), pids: map[int]string{}}
	for _, b := range []string{"mysqlha-agent", "agentctl"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make build` (or `make demo`, which builds it)", b, cfg.BinDir)
		}
	}
	if err := claimDir(cfg.Dir); err != nil {
		return err
	}
	defer func() {
		if terr := d.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
	}()
	err = d.run(ctx)
	if err != nil && ctx.Err() != nil {
		d.p.abort("interrupted")
		d.p.note("stop requested: stopping what was started")
		return nil
	}
	if err != nil {
		d.p.failed()
		d.dumpLogs()
		return err
	}
	if cfg.CI {
		return nil
	}
	d.printTry()
	<-ctx.Done()
	d.p.plain("")
	d.p.note("stop requested: stopping the cluster")
	return nil
}

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

func (d *demo) run(ctx context.Context) error {
	if err := d.checkPorts(); err != nil {
		return err
	}
	if err := d.startMariaDB(); err != nil {
		return err
	}
	var err error
	switch d.cfg.Backend {
	case BackendEtcd:
		d.p.start("starting the DCS: an embedded etcd server, in this process")
		var e *etcdBackend
		e, err = startEtcdBackend(d.cfg)
		if err != nil {
			return err
		}
		d.be = e
		d.p.done("%s", e.endpoint())
	case BackendKubernetes:
		k := &kubeBackend{cfg: d.cfg, track: d.track, podIP: map[string]string{}, seenEvt: map[string]bool{}}
		d.be = k // set first: teardown stops whatever part of it started
		if err := k.start(ctx, d.p); err != nil {
			return err
		}
	}
	if err := d.startServers(); err != nil {
		return err
	}
	if err := d.be.prepare(ctx, d.p, d.members); err != nil {
		return err
	}
	if err := d.startAgents(); err != nil {
		return err
	}

	primary, err := d.bootstrap(ctx)
	if err != nil {
		return err
	}
	if err := d.be.show(ctx, d.p, primary.name); err != nil {
		return err
	}
	if err := d.agentctl(ctx, "status"); err != nil {
		return err
	}
	if err := d.firstWrite(ctx, primary); err != nil {
		return err
	}

	newPrimary, err := d.drill(ctx, primary)
	if err != nil {
		return err
	}
	if err := d.be.show(ctx, d.p, newPrimary.name); err != nil {
		return err
	}
	if err := d.agentctl(ctx, "status"); err != nil {
		return err
	}
	if err := d.rejoin(ctx, primary, newPrimary); err != nil {
		return err
	}
	if err := d.be.show(ctx, d.p, newPrimary.name); err != nil {
		return err
	}
	if err := d.settleRecords(ctx, newPrimary); err != nil {
		return err
	}
	if err := d.agentctl(ctx, "status"); err != nil {
		return err
	}
	if err := d.agentctl(ctx, "history"); err != nil {
		return err
	}
	if d.cfg.CI {
		d.p.note("demo checks passed: bootstrap (1 primary, %d replicas), failover %s -> %s, %s rejoined as a replica",
			len(d.members)-1, primary.name, newPrimary.name, primary.name)
	}
	return nil
}

// ---- MariaDB ----

var versionRE = regexp.MustCompile(`Ver\s+(\S+)`)

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

func (d *demo) port(base, i int) int {
	if base == 0 {
		return 0
	}
	return base + i
}

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
	var where []string
	for _, m := range d.members {
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

func (d *demo) track(pid int, what string) {
	if pid == 0 {
		return
	}
	d.pidMu.Lock()
	defer d.pidMu.Unlock()
	d.pids[pid] = what
}

// ---- agents ----

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
			"--listen="+m.listen, "--advertise-api-url="+m.apiURL,
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

// statuses reads every member's GET /status; nil entries did not answer.
func (d *demo) statuses(ctx context.Context, ms []*member) []*memberStatus {
	out := make([]*memberStatus, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = m.status(ctx) }()
	}
	wg.Wait()
	return out
}

// topology returns the primary when exactly one member of ms is the
// writable lock holder and every other member replicates from it.
func (d *demo) topology(ctx context.Context, ms []*member) (*member, []*memberStatus) {
	sts := d.statuses(ctx, ms)
	var primary *member
	for i, st := range sts {
		if st.isPrimary() {
			if primary != nil {
				return nil, sts
			}
			primary = ms[i]
		}
	}
	if primary == nil {
		return nil, sts
	}
	for i, st := range sts {
		if ms[i] != primary && !st.replicates(primary.addr()) {
			return nil, sts
		}
	}
	return primary, sts
}

// describe summarises statuses for an error message.
func describe(ms []*member, sts []*memberStatus) string {
	var b strings.Builder
	for i, st := range sts {
		if st == nil {
			fmt.Fprintf(&b, "\n  %s: agent API %s does not answer", ms[i].name, ms[i].apiURL)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: role=%s holds_lock=%v writable=%v replication=%s source=%q leader=%q action=%s reason=%q error=%q",
			ms[i].name, st.Role, st.HoldsLock, st.Writable, st.Replication, st.Source, st.Leader, st.Action, st.Reason, st.Error)
	}
	return b.String()
}

func (d *demo) bootstrap(ctx context.Context) (*member, error) {
	d.p.start("waiting for the agents to elect a primary and set up replication")
	deadline := time.Now().Add(bootstrapTimeout)
	for {
		primary, sts := d.topology(ctx, d.members)
		if primary != nil {
			var replicas []*member
			for _, m := range d.members {
				if m != primary {
					replicas = append(replicas, m)
				}
			}
			d.p.done("%s is primary; %s %s from it", primary.name, names(replicas), verb(len(replicas), "replicates", "replicate"))
			return primary, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no primary with %d streaming replicas after %v; the agents report:%s",
				len(d.members)-1, bootstrapTimeout, describe(d.members, sts))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ---- data ----

const createTable = `CREATE TABLE IF NOT EXISTS drill (
	id INT AUTO_INCREMENT PRIMARY KEY,
	note VARCHAR(200) NOT NULL,
	written_on VARCHAR(64) NOT NULL,
	written_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`

func (d *demo) firstWrite(ctx context.Context, primary *member) error {
	d.p.start("writing a row on %s as the application user (app@%s)", primary.name, primary.addr())
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := primary.app.ExecContext(wctx, createTable); err != nil {
		return fmt.Errorf("creating app.drill on %s: %w", primary.name, err)
	}
	if _, err := primary.app.ExecContext(wctx, "INSERT INTO drill (note, written_on) VALUES (?, @@hostname)",
		"before the drill, on "+primary.name); err != nil {
		return fmt.Errorf("writing to %s: %w", primary.name, err)
	}
	d.p.done("INSERT INTO app.drill ok")

	d.p.start("checking that the replicas have it")
	var replicas []*member
	for _, m := range d.members {
		if m != primary {
			replicas = append(replicas, m)
		}
	}
	if err := d.waitRows(ctx, replicas, 1, 30*time.Second); err != nil {
		return err
	}
	// The application user is refused on replicas: read_only holds for it.
	for _, m := range replicas {
		_, err := m.app.ExecContext(wctx, "INSERT INTO drill (note, written_on) VALUES ('must fail', @@hostname)")
		if !isReadOnly(err) {
			return fmt.Errorf("a write to replica %s as the application user: want a read_only refusal, got %v", m.name, err)
		}
	}
	d.p.done("%s %s it; a write there as app is refused (read_only)", names(replicas), verb(len(replicas), "has", "have"))
	return nil
}

// settleRecords waits until the member records in the DCS, which agentctl
// shows and which members republish at most every dcs.DefaultMemberRefresh,
// carry the primary's current GTID, so that the status printed next is
// current rather than a snapshot from before the last writes. Not reaching
// that is not an error: the status is then shown as it is.
func (d *demo) settleRecords(ctx context.Context, primary *member) error {
	d.p.start("waiting for the members' DCS records to show the latest GTID (republished at most every %v)", dcs.DefaultMemberRefresh)
	deadline := time.Now().Add(dcs.DefaultMemberRefresh + 5*time.Second)
	for {
		st := primary.status(ctx)
		var view struct {
			Leader  string `json:"leader"`
			Members []struct {
				Name string `json:"name"`
				Role string `json:"role"`
				GTID string `json:"gtid"`
			} `json:"members"`
		}
		out, err := d.agentctlOutput(ctx, "status", "-o", "json")
		if err == nil && st != nil && json.Unmarshal(out, &view) == nil && view.Leader == primary.name &&
			len(view.Members) == len(d.members) {
			current := true
			for _, m := range view.Members {
				wantRole := "replica"
				if m.Name == primary.name {
					wantRole = "primary"
				}
				current = current && m.GTID == st.GTID && m.Role == wantRole
			}
			if current {
				d.p.done("every record shows %s", st.GTID)
				return nil
			}
		}
		if time.Now().After(deadline) {
			d.p.done("not all yet; showing them as they are")
			return nil
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// rows counts app.drill on m.
func rows(ctx context.Context, m *member) (int, error) {
	var n int
	err := m.app.QueryRowContext(ctx, "SELECT COUNT(*) FROM drill").Scan(&n)
	return n, err
}

func (d *demo) waitRows(ctx context.Context, ms []*member, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for _, m := range ms {
			n, err := rows(ctx, m)
			if err != nil || n != want {
				missing = append(missing, fmt.Sprintf("%s has %d (%v)", m.name, n, err))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("want %d rows in app.drill everywhere after %v: %s", want, timeout, strings.Join(missing, "; "))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// ---- the drill ----

// drill kills the primary's mysqld and agent, as a dying pod would, and
// follows the survivors live until another member holds the lock, accepts
// a write, the others replicate from it and (Kubernetes) its Service routes
// to it. It returns the new primary.
func (d *demo) drill(ctx context.Context, old *member) (*member, error) {
	var survivors []*member
	for _, m := range d.members {
		if m != old {
			survivors = append(survivors, m)
		}
	}
	mysqldPid, agentPid := old.server.Pid(), old.agentPid()
	d.p.start("drill: kill -9 the primary %s: its mysqld (pid %d) and its agent (pid %d)", old.name, mysqldPid, agentPid)
	killed := time.Now()
	old.stopAgent(syscall.SIGKILL, 10*time.Second)
	old.server.Kill()
	d.p.done("killed")

	d.p.note("drill: waiting for %s to take over (the lock expires after ttl %v; the best replica takes it and promotes itself)",
		names(survivors), dcs.DefaultTTL)
	var (
		lockAt, writeAt, settledAt time.Duration
		writer, holder             *member
		last                       string
		deadline                   = killed.Add(failoverTimeout)
	)
	for {
		primary, sts := d.topology(ctx, survivors)
		var parts []string
		for i, st := range sts {
			parts = append(parts, survivors[i].name+" "+st.short())
			if st != nil && st.HoldsLock && holder == nil {
				holder, lockAt = survivors[i], time.Since(killed)
			}
		}
		line := strings.Join(parts, ", ")
		if extra := d.be.live(ctx); extra != "" {
			line += " " + extra
		}
		if line != last {
			d.p.detail("+%-5s %s", seconds(time.Since(killed)), line)
			last = line
		}
		if writer == nil {
			// Try a write on every survivor: the first that takes one is
			// the new primary as the application sees it.
			for _, m := range survivors {
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := m.app.ExecContext(wctx, "INSERT INTO drill (note, written_on) VALUES (?, @@hostname)",
					"first write after the failover, on "+m.name)
				cancel()
				if err == nil {
					writer, writeAt = m, time.Since(killed)
					d.p.detail("+%-5s %s accepted a write", seconds(writeAt), writer.name)
					if holder == nil {
						holder, lockAt = writer, writeAt
					}
					if holder != writer {
						return nil, fmt.Errorf("split brain: %s accepted a write but %s was seen holding the lock", writer.name, holder.name)
					}
					break
				}
			}
		}
		if writer != nil && primary != nil && primary != writer {
			return nil, fmt.Errorf("%s accepted the write but %s is the primary", writer.name, primary.name)
		}
		if writer != nil && primary == writer && d.be.routed(ctx, writer.name) {
			settledAt = time.Since(killed)
			break
		}
		if time.Now().After(deadline) {
			what := "no survivor accepted a write"
			if writer != nil {
				what = fmt.Sprintf("%s accepted a write, but the others do not all replicate from it or it is not routed to", writer.name)
			}
			return nil, fmt.Errorf("%s within %v of the kill; the agents report:%s", what, failoverTimeout, describe(survivors, sts))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
	var others []*member
	for _, m := range survivors {
		if m != writer {
			others = append(others, m)
		}
	}
	d.p.note("drill: %s took the lock %s after the kill and accepted a write after %s; %s %s from it after %s%s",
		writer.name, seconds(lockAt), seconds(writeAt), names(others), verb(len(others), "replicates", "replicate"),
		seconds(settledAt), d.be.routedNote())
	d.p.start("checking the rows on %s", names(survivors))
	if err := d.waitRows(ctx, survivors, 2, 30*time.Second); err != nil {
		return nil, err
	}
	d.p.done("both rows everywhere: the one written on %s before the drill, and the one on %s after it", old.name, writer.name)
	return writer, nil
}

// rejoin restarts the old primary's mysqld and agent and waits until it
// replicates from the new primary and has every row.
func (d *demo) rejoin(ctx context.Context, old, primary *member) error {
	d.p.start("restarting %s's mysqld and agent (the pod comes back)", old.name)
	if err := old.server.Start(); err != nil {
		return fmt.Errorf("restarting %s's mysqld: %w", old.name, err)
	}
	d.track(old.server.Pid(), "mariadbd "+old.name+" (restarted)")
	pid, err := old.startAgent()
	if err != nil {
		return err
	}
	d.track(pid, "mysqlha-agent "+old.name+" (restarted)")
	d.p.done("mysqld pid %d, agent pid %d", old.server.Pid(), pid)

	d.p.start("waiting for %s to rejoin as a replica of %s", old.name, primary.name)
	deadline := time.Now().Add(rejoinTimeout)
	for {
		p, sts := d.topology(ctx, d.members)
		if p == primary {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not rejoin within %v; the agents report:%s", old.name, rejoinTimeout, describe(d.members, sts))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	if err := d.waitRows(ctx, []*member{old}, 2, 30*time.Second); err != nil {
		return err
	}
	d.p.done("%s replicates from %s and has the row written after the failover", old.name, primary.name)
	return nil
}

// ---- agentctl ----

// agentctl runs the real agentctl binary and prints the command and its
// output.
func (d *demo) agentctl(ctx context.Context, args ...string) error {
	full := append(append(d.be.ctlArgs(), "--cluster="+d.cfg.Cluster), args...)
	d.p.note("$ %s %s", displayPath(filepath.Join(d.cfg.BinDir, "agentctl")), strings.Join(full, " "))
	out, err := d.agentctlOutput(ctx, args...)
	d.p.block(string(out))
	return err
}

// agentctlOutput runs agentctl and returns its combined output.
func (d *demo) agentctlOutput(ctx context.Context, args ...string) ([]byte, error) {
	full := append(append(d.be.ctlArgs(), "--cluster="+d.cfg.Cluster), args...)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(d.cfg.BinDir, "agentctl"), full...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("agentctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// cleanEnv is the environment without the variables agentctl and the agent
// read as defaults, so a user's exports for another cluster do not leak in.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MYSQLHA_") || strings.HasPrefix(k, "POD_") || k == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// displayPath shows p relative to the working directory when it is below it.
func displayPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

func (d *demo) printTry() {
	ctl := displayPath(filepath.Join(d.cfg.BinDir, "agentctl"))
	m := d.members[0]
	p := d.p
	p.plain("")
	p.plain("The cluster keeps running. In another terminal, try:")
	p.plain("")
	p.plain("  export %s", strings.Join(append(d.be.env(), "MYSQLHA_CLUSTER="+d.cfg.Cluster), " "))
	for _, l := range [][2]string{
		{ctl + " status", "members, roles, lag, GTIDs, the lock"},
		{ctl + " status --watch", "live; keep it open while you try the rest"},
		{ctl + " switchover --force --wait", "planned, lossless hand-over to the best replica"},
		{ctl + " pause", "maintenance mode: no automatic failover"},
		{ctl + " resume --wait", ""},
		{ctl + " history", "failovers and switchovers"},
		{"curl -s " + m.apiURL + "/status", "one agent's own view (" + m.name + ")"},
		{fmt.Sprintf("mariadb -h%s -P%d -u%s -p%s %s", m.server.Host, m.server.Port, mysqltest.AppUser, mysqltest.AppPassword,
			mysqltest.AppDatabase), m.name + " as the application user"},
	} {
		if l[1] == "" {
			p.plain("  %s", l[0])
			continue
		}
		p.plain("  %-50s # %s", l[0], l[1])
	}
	for _, l := range d.be.tryLines() {
		p.plain("%s", l)
	}
	p.plain("")
	for _, m := range d.members {
		p.plain("  %s: mysql %s, agent API %s, logs %s and %s", m.name, m.addr(), m.apiURL, m.logPath, m.server.LogPath())
	}
	p.plain("")
	p.plain("Stop: Ctrl-C here, or `make demo-stop` from another terminal (everything is removed).")
}

// ---- teardown ----

func (d *demo) dumpLogs() {
	for _, m := range d.members {
		if m.logPath != "" {
			d.p.plain("----- %s: last 30 lines of the agent log %s -----\n%s", m.name, m.logPath, localproc.Tail(m.logPath, 30))
		}
		d.p.plain("----- %s: last 8 lines of the mysqld error log -----\n%s", m.name, localproc.Tail(m.server.LogPath(), 8))
	}
	if k, ok := d.be.(*kubeBackend); ok {
		k.dumpLogs(d.p)
	}
}

// teardown stops agents, servers and the DCS, checks that no process the
// demo started is left, and removes the work dir.
func (d *demo) teardown() error {
	var errs []error
	if len(d.members) > 0 {
		d.p.start("stopping %d agents (SIGTERM)", len(d.members))
		var wg sync.WaitGroup
		for _, m := range d.members {
			wg.Add(1)
			go func() { defer wg.Done(); m.stopAgent(syscall.SIGTERM, 10*time.Second) }()
		}
		wg.Wait()
		d.p.done("stopped")
		d.p.start("stopping %d MariaDB servers", len(d.members))
		for _, m := range d.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if m.app != nil {
					m.app.Close()
				}
				m.server.Stop()
			}()
		}
		wg.Wait()
		d.p.done("stopped")
	}
	if d.be != nil {
		d.p.start("stopping the DCS")
		d.be.stop()
		d.p.done("stopped")
	}

	d.p.start("checking that no process the demo started is left")
	var left []string
	d.pidMu.Lock()
	n := len(d.pids)
	for pid, what := range d.pids {
		if localproc.Alive(pid) {
			left = append(left, fmt.Sprintf("%s (pid %d)", what, pid))
		}
	}
	d.pidMu.Unlock()
	// A mariadbd (--datadir) or agent (--mysql-password-file) of this demo
	// that escaped the pid bookkeeping names a path in the work dir.
	for _, p := range localproc.Scan(localproc.Under(d.cfg.Dir)) {
		left = append(left, p.String())
	}
	if len(left) > 0 {
		d.p.failed()
		errs = append(errs, fmt.Errorf("processes left running: %s", strings.Join(left, ", ")))
	} else {
		d.p.done("none left (%d started)", n)
	}

	if d.cfg.Keep {
		d.p.note("kept %s (--keep); the next demo run removes it", d.cfg.Dir)
	} else {
		d.p.start("removing %s", d.cfg.Dir)
		if err := os.RemoveAll(d.cfg.Dir); err != nil {
			d.p.failed()
			errs = append(errs, err)
		} else {
			d.p.done("removed")
		}
	}
	return errors.Join(errs...)
}

// ---- etcd backend ----

type etcdBackend struct {
	etcd *etcdtest.Server
}

// startEtcdBackend starts the embedded etcd of dcs/etcd/etcdtest, the tests'
// harness, in the work dir, on the fixed client port unless it is 0.
func startEtcdBackend(cfg Config) (*etcdBackend, error) {
	e, err := etcdtest.Launch(filepath.Join(cfg.Dir, "etcd"), etcdtest.WithClientPort(cfg.EtcdPort))
	if err != nil {
		return nil, err
	}
	return &etcdBackend{etcd: e}, nil
}

// endpoint is etcd's loopback client URL.
func (e *etcdBackend) endpoint() string { return e.etcd.Endpoints()[0] }

func (e *etcdBackend) prepare(context.Context, *progress, []*member) error { return nil }

func (e *etcdBackend) agentArgs(*member) []string {
	return []string{"--dcs=etcd", "--etcd-endpoints=" + e.endpoint()}
}

func (e *etcdBackend) ctlArgs() []string {
	return []string{"--dcs=etcd", "--etcd-endpoints=" + e.endpoint()}
}

func (e *etcdBackend) env() []string {
	return []string{"MYSQLHA_DCS=etcd", "MYSQLHA_ETCD_ENDPOINTS=" + e.endpoint()}
}

func (e *etcdBackend) show(context.Context, *progress, string) error { return nil }

func (e *etcdBackend) live(context.Context) string { return "" }

func (e *etcdBackend) routed(context.Context, string) bool { return true }

func (e *etcdBackend) routedNote() string { return "" }

func (e *etcdBackend) tryLines() []string { return nil }

func (e *etcdBackend) stop() { e.etcd.Stop() }
