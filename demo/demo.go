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
// Guarantees: every server, agent and control-plane process it starts is in
// its own process group and dies with the supervisor (parent-death signal
// SIGKILL; testenv/localproc for the agents), so even a kill -9 of the
// supervisor leaves nothing running; on a normal exit it stops agents,
// servers and the DCS, checks by pid and by a scan of /proc that none is
// left, and removes its work dir. Nothing outside the work dir is written
// except MariaDB's template data directory, cached in the system temp dir by
// mysqltest.
//
// One job per file: demo.go runs the steps in order; servers.go starts
// MariaDB and the agents; etcd.go and kube.go are the DCS backends;
// topology.go reads what the agents report; data.go writes and counts the
// application's rows; drill.go is the failover drill and the rejoin;
// agentctl.go runs agentctl; teardown.go stops everything and checks that
// nothing is left; member.go, output.go and pidfile.go hold a member, the
// narrative and the work dir's pid file.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
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

// demo is one run: what it started, for the steps and for teardown.
type demo struct {
	cfg     Config
	p       *progress
	be      backend
	members []*member
	secrets struct{ agent, repl, apiToken string }

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

// run is the sequence of steps: start MariaDB, the DCS and the agents, wait
// for the bootstrap, write, run the drill and the rejoin, and show the
// cluster through agentctl (and the backend's objects) after each.
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

// sleep waits d or until ctx ends, whichever is first.
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
