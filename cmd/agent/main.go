// Command mysqlha-agent is the HA sidecar that runs next to mysqld in every
// database pod (or next to any mysqld, with the etcd DCS). It only wires:
// flags and environment -> agent.Config, a zap logger, a Prometheus registry,
// the DCS client, the MySQL dialer and the pod labeler; then agent.Run until
// SIGTERM or SIGINT, on which a leader hands over before exiting.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"k8s.io/klog/v2"

	"github.com/mysqlha/mysqlha/agent"
	"github.com/mysqlha/mysqlha/agent/podrole"
	"github.com/mysqlha/mysqlha/agent/rolehook"
	"github.com/mysqlha/mysqlha/backup"
	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/connect"
	dcsetcd "github.com/mysqlha/mysqlha/dcs/etcd"
	"github.com/mysqlha/mysqlha/internal/apiauth"
	"github.com/mysqlha/mysqlha/internal/apitls"
	"github.com/mysqlha/mysqlha/internal/mysqldproc"
	"github.com/mysqlha/mysqlha/internal/pemfiles"
	"github.com/mysqlha/mysqlha/internal/version"
	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/salvage"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// The live heap of an idle agent is a few MB, under the runtime's
		// 4 MB minimum target: collecting at +50% instead of +100% keeps
		// the sidecar's resident memory down, at a cost of well under 1%
		// of a core (BenchmarkIdleAgent).
		debug.SetGCPercent(50)
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mysqlha-agent:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command line that does not parse: exit code 2, and a
// pointer to --help rather than the whole flag list.
type usageError struct{ err error }

func (e usageError) Error() string {
	return e.err.Error() + " (mysqlha-agent --help lists the flags)"
}

func (e usageError) Unwrap() error { return e.err }

func env(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

type options struct {
	cfg                       agent.Config
	namespace, dcsKind        string
	etcdEndpoints, etcdPrefix string
	etcd                      connect.EtcdSecurity
	apiTLS                    apitls.Files
	healthListen              string
	apiTokenFile              string
	apiInsecure               bool
	apiGuard                  apiauth.Guard
	mysqlTLS                  struct{ ca, cert, key string }
	replTLS                   bool
	replTLSFiles              mysqlctl.SourceTLS
	kubeconfig                string
	localAddr, user, pwFile   string
	version                   bool
	roleHook                  string
	roleHookTimeout           time.Duration
	datadir                   string
	replPwFile                string
	logLevel, semiSync        string
	rebuildDiverged           string
	labelPods, killHung       bool
	primaryService, podIP     string
	mysqlPort                 int
	dialTimeout               time.Duration
}

// defineFlags defines every flag of the agent on a new flag set, bound to o
// and, for the bootstrap cluster config, to b. The flag reference of
// docs/reference.md is rendered from it (TestREADMEFlags).
func defineFlags(o *options, b *dcs.Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("mysqlha-agent", pflag.ContinueOnError)
	podIP := env("POD_IP", "127.0.0.1")
	fs.StringVar(&o.cfg.Cluster, "cluster", env("MYSQLHA_CLUSTER", ""), "cluster name (env MYSQLHA_CLUSTER)")
	fs.StringVar(&o.cfg.Name, "name", env("POD_NAME", ""), "this member's name, the pod name (env POD_NAME)")
	fs.StringVar(&o.namespace, "namespace", env("POD_NAMESPACE", "default"), "Kubernetes namespace (env POD_NAMESPACE)")
	fs.StringVar(&o.dcsKind, "dcs", env("MYSQLHA_DCS", "kubernetes"), "DCS backend: kubernetes or etcd (env MYSQLHA_DCS)")
	fs.StringVar(&o.etcdEndpoints, "etcd-endpoints", env("MYSQLHA_ETCD_ENDPOINTS", ""), "comma-separated etcd endpoints (env MYSQLHA_ETCD_ENDPOINTS)")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", dcsetcd.DefaultPrefix, "etcd key prefix")
	// Defined once for both binaries, on a Go flag set (dcs/connect).
	etcdFlags := flag.NewFlagSet("etcd", flag.ContinueOnError)
	o.etcd.RegisterFlags(etcdFlags)
	fs.AddGoFlagSet(etcdFlags)
	fs.StringVar(&o.kubeconfig, "kubeconfig", env("KUBECONFIG", ""), "kubeconfig file; in-cluster config when empty (env KUBECONFIG)")
	fs.StringVar(&o.localAddr, "mysql-local-addr", "127.0.0.1:3306", "where the agent reaches its own mysqld (host:port or socket path)")
	fs.StringVar(&o.cfg.MySQLAddr, "advertise-mysql-addr", env("MYSQLHA_ADVERTISE_MYSQL_ADDR", net.JoinHostPort(podIP, "3306")), "host:port where peers and replicas reach this mysqld (env MYSQLHA_ADVERTISE_MYSQL_ADDR; the default's address is env POD_IP)")
	fs.StringVar(&o.datadir, "mysql-datadir", "", "the local mysqld's data directory as this agent sees it (mounted); enables agentctl reinit on this member, as target and as donor (MariaDB: needs mariabackup and mbstream)")
	fs.StringVar(&o.user, "mysql-user", "mysqlha", "the agent's MySQL user")
	fs.StringVar(&o.pwFile, "mysql-password-file", "", "file holding the agent user's password")
	fs.StringVar(&o.cfg.ReplicationUser, "replication-user", "repl", "user replicas replicate as")
	fs.StringVar(&o.replPwFile, "replication-password-file", "", "file holding the replication user's password")
	fs.StringVar(&o.mysqlTLS.ca, "mysql-tls-ca", "", "connect to mysqld (this member's and its peers') over TLS, verifying the server against this CA")
	fs.StringVar(&o.mysqlTLS.cert, "mysql-tls-cert", "", "client certificate for mysqld connections (with --mysql-tls-key)")
	fs.StringVar(&o.mysqlTLS.key, "mysql-tls-key", "", "key of --mysql-tls-cert")
	fs.BoolVar(&o.replTLS, "replication-tls", false, "replicas connect to their source over TLS (MASTER_SSL / SOURCE_SSL)")
	fs.StringVar(&o.replTLSFiles.CA, "replication-tls-ca", "", "with --replication-tls: CA, as a path on the replica's server, that verifies the source")
	fs.StringVar(&o.replTLSFiles.Cert, "replication-tls-cert", "", "with --replication-tls: client certificate, a path on the replica's server")
	fs.StringVar(&o.replTLSFiles.Key, "replication-tls-key", "", "with --replication-tls: its key, a path on the replica's server")
	fs.DurationVar(&o.dialTimeout, "mysql-dial-timeout", time.Second, "connect timeout for mysqld, local and peers")
	fs.StringVar(&o.cfg.ListenAddr, "listen", ":8008", "HTTP API listen address")
	fs.StringVar(&o.apiTLS.Cert, "api-tls-cert", "", "serve the HTTP API over TLS with this certificate (with --api-tls-key); it also authenticates this member to its peers")
	fs.StringVar(&o.apiTLS.Key, "api-tls-key", "", "key of --api-tls-cert")
	fs.StringVar(&o.apiTLS.CA, "api-tls-ca", "", "CA that verifies peers' API certificates, and the client certificate POST /failsafe requires")
	fs.StringVar(&o.apiTLS.ServerName, "api-tls-server-name", "", "the name peers' API certificates must carry, whatever host their API URL names (pod IPs); needs --api-tls-ca")
	fs.StringVar(&o.healthListen, "health-listen", "", "also serve the health checks alone ("+strings.Join(agent.HealthPaths, ", ")+") over plain HTTP here, e.g. 127.0.0.1:8009, for what cannot speak TLS (the preStop hook)")
	fs.StringVar(&o.apiTokenFile, "api-token-file", env("MYSQLHA_API_TOKEN_FILE", ""), "file holding the cluster's API token, the same for every member (a Secret): peers send it, and every endpoint but the health checks requires it (env MYSQLHA_API_TOKEN_FILE)")
	fs.BoolVar(&o.apiInsecure, "api-insecure", false, "serve the HTTP API, backups included, to anyone: only for a test on one machine")
	fs.StringVar(&o.cfg.APIURL, "advertise-api-url", env("MYSQLHA_ADVERTISE_API_URL", "http://"+net.JoinHostPort(podIP, "8008")), "URL where peers reach this agent's API (env MYSQLHA_ADVERTISE_API_URL; the default's address is env POD_IP)")
	fs.BoolVar(&o.cfg.NoFailover, "nofailover", false, "never become leader")
	fs.StringVar(&o.cfg.PodUID, "pod-uid", env("POD_UID", ""), "this pod's UID (env POD_UID, from metadata.uid): when the kubelet reports every container of the leader's pod stopped, peers take over before the ttl")
	fs.IntVar(&o.cfg.FailoverPriority, "failover-priority", 0, "ranks equally up-to-date candidates; higher wins; among equal priorities, the one with the fewest received transactions left to apply")
	fs.DurationVar(&o.cfg.SemiSyncTimeout, "semi-sync-timeout", 10*time.Second, "how long the primary waits for an acknowledgement (semi-sync mode on)")
	fs.DurationVar(&b.TTL, "ttl", b.TTL, "bootstrap: leader lock validity")
	fs.DurationVar(&b.LoopWait, "loop-wait", b.LoopWait, "bootstrap: HA loop period")
	fs.DurationVar(&b.RetryTimeout, "retry-timeout", b.RetryTimeout, "bootstrap: bound of one DCS or MySQL call")
	fs.DurationVar(&b.SafetyMargin, "safety-margin", b.SafetyMargin, "bootstrap: how long before the lock could expire the leader fences")
	fs.DurationVar(&b.MaximumLagOnFailover, "maximum-lag-on-failover", b.MaximumLagOnFailover, "bootstrap: replicas lagging more never take over")
	fs.DurationVar(&b.MaximumLagForReads, "maximum-lag-for-reads", b.MaximumLagForReads, "bootstrap: replicas lagging more (a receiver down: since it last received) are not Ready, so out of the read Service; 0 keeps them serving however stale")
	fs.StringVar(&o.semiSync, "semi-sync", "off", "bootstrap: semi-sync mode off, on or strict")
	fs.StringVar(&o.rebuildDiverged, "rebuild-diverged", b.RebuildDiverged.String(), "bootstrap: auto (save a diverged member's extra transactions to a file on its volume, then rebuild it) or report")
	fs.DurationVar(&b.ReseedAfter, "reseed-after", b.ReseedAfter, "bootstrap: rebuild a replica whose source purged the binary logs it needs after this long; 0 never")
	fs.BoolVar(&b.Failsafe, "failsafe", false, "bootstrap: keep the primary writable while the DCS is unreachable, as long as every member confirms it over HTTP")
	fs.StringVar(&o.roleHook, "on-role-change", "", "executable (absolute path) run at every role change of this member as EXE ROLE CLUSTER MEMBER, "+
		"ROLE being primary, replica or none (also in MYSQLHA_ROLE, MYSQLHA_CLUSTER, MYSQLHA_MEMBER); in the background, one run at a time, "+
		"changes during a run coalesced to the latest; failures are logged")
	fs.DurationVar(&o.roleHookTimeout, "on-role-change-timeout", 10*time.Second, "a run of --on-role-change still going after this long is killed, with its process group")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&o.labelPods, "label-pods", true, "with --dcs=kubernetes: label pods by role and record Events")
	fs.StringVar(&o.primaryService, "primary-service", "", "with --dcs=kubernetes: a Service without a selector, its port named mysql, that the primary routes to itself "+
		"once writable, writing its one EndpointSlice with --pod-ip: the route moves from the old primary to the new in one update (needs --label-pods)")
	fs.StringVar(&o.podIP, "pod-ip", env("POD_IP", ""), "this pod's IP address, for --primary-service (env POD_IP, from status.podIP)")
	fs.BoolVar(&o.killHung, "kill-hung-mysqld", true, "kill the local mysqld when it hangs for ttl while this member leads, so that another can take over "+
		"(needs its process in view: the same host, or a pod with shareProcessNamespace: true)")
	fs.BoolVar(&o.version, "version", false, "print the agent's version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: mysqlha-agent [flags]

Runs the HA loop for one MySQL/MariaDB member. Timings (--ttl ...) are the
bootstrap values: the first member stores them in the DCS; later the stored
cluster config rules.

Example (etcd DCS, outside Kubernetes):
  mysqlha-agent --dcs=etcd --etcd-endpoints=http://127.0.0.1:2379 --cluster=demo --name=db1 \
    --mysql-local-addr=127.0.0.1:3306 --advertise-mysql-addr=127.0.0.1:3306 \
    --mysql-password-file=/etc/mysqlha/agent-password --replication-password-file=/etc/mysqlha/repl-password \
    --listen=127.0.0.1:8008 --advertise-api-url=http://127.0.0.1:8008 --api-token-file=/etc/mysqlha/api-token

Flags:
`)
		fs.PrintDefaults()
	}
	return fs
}

// finish checks the parsed flags and derives the agent's config from them.
func (o *options) finish(fs *pflag.FlagSet, b dcs.Config) (*options, error) {
	mode, err := dcs.ParseSemiSyncMode(o.semiSync)
	if err != nil {
		return nil, fmt.Errorf("--semi-sync: %w", err)
	}
	b.SemiSync = mode
	if b.RebuildDiverged, err = dcs.ParseRebuildPolicy(o.rebuildDiverged); err != nil {
		return nil, fmt.Errorf("--rebuild-diverged: %w", err)
	}
	o.cfg.Bootstrap = b
	if o.apiTLS.Enabled() && strings.HasPrefix(o.cfg.APIURL, "http://") {
		explicit := fs.Changed("advertise-api-url")
		if explicit || os.Getenv("MYSQLHA_ADVERTISE_API_URL") != "" {
			return nil, fmt.Errorf("--advertise-api-url %s: the API serves TLS (--api-tls-cert): use https://", o.cfg.APIURL)
		}
		o.cfg.APIURL = "https://" + strings.TrimPrefix(o.cfg.APIURL, "http://")
	}
	if o.replTLS {
		files := o.replTLSFiles
		o.cfg.ReplicationTLS = &files
	} else if o.replTLSFiles != (mysqlctl.SourceTLS{}) {
		return nil, errors.New("--replication-tls-ca/-cert/-key need --replication-tls")
	}
	o.apiGuard = apiauth.Guard{Certs: o.apiTLS.CA != "", Open: o.apiInsecure}
	if o.apiTokenFile != "" {
		if o.apiGuard.Token, err = apiauth.ReadToken("--api-token-file", o.apiTokenFile); err != nil {
			return nil, err
		}
	}
	if err := o.apiGuard.Check(); err != nil {
		return nil, err
	}
	if o.roleHook != "" {
		if err := rolehook.Check(o.roleHook); err != nil {
			return nil, err
		}
		if o.roleHookTimeout <= 0 {
			return nil, fmt.Errorf("--on-role-change-timeout %s: give a positive duration", o.roleHookTimeout)
		}
	}
	if err := o.checkPasswordFile(); err != nil {
		return nil, err
	}
	if o.replPwFile != "" {
		pw, err := os.ReadFile(o.replPwFile)
		if err != nil {
			return nil, fmt.Errorf("--replication-password-file: %w", err)
		}
		o.cfg.ReplicationPassword = strings.TrimRight(string(pw), "\r\n")
	}
	if err := o.cfg.Validate(); err != nil {
		return nil, err
	}
	if err := o.checkPrimaryService(); err != nil {
		return nil, err
	}
	return o, nil
}

// checkPrimaryService checks what routing the primary Service needs: the
// Kubernetes DCS with --label-pods (the route goes with the pod's label),
// this pod's address, and mysqld's port from --advertise-mysql-addr.
func (o *options) checkPrimaryService() error {
	if o.primaryService == "" {
		return nil
	}
	switch {
	case o.dcsKind != "kubernetes":
		return fmt.Errorf("--primary-service %s needs --dcs=kubernetes", o.primaryService)
	case !o.labelPods:
		return fmt.Errorf("--primary-service %s needs --label-pods", o.primaryService)
	case net.ParseIP(o.podIP) == nil:
		return fmt.Errorf("--primary-service %s needs this pod's IP address: --pod-ip %q is not one (set env POD_IP from status.podIP)", o.primaryService, o.podIP)
	}
	_, port, err := net.SplitHostPort(o.cfg.MySQLAddr)
	if err == nil {
		o.mysqlPort, err = strconv.Atoi(port)
	}
	if err != nil {
		return fmt.Errorf("--primary-service %s routes to the port of --advertise-mysql-addr %q, which has none: %v", o.primaryService, o.cfg.MySQLAddr, err)
	}
	return nil
}

// checkPasswordFile fails at start, naming the file, where every login
// would fail later: no --mysql-password-file for a TCP address (only a
// socket may log in without a password, by unix_socket), or a file that
// cannot be read. The file is read again at every login, so that a
// rotated Secret takes effect without a restart.
func (o *options) checkPasswordFile() error {
	if o.pwFile == "" {
		if strings.HasPrefix(o.localAddr, "/") {
			return nil
		}
		return fmt.Errorf("--mysql-password-file is required: the file holding the password of MySQL user %q "+
			"(--mysql-user), mounted from a Secret; only a socket --mysql-local-addr may go without one", o.user)
	}
	f, err := os.Open(o.pwFile)
	if err != nil {
		return fmt.Errorf("--mysql-password-file: %w", err)
	}
	return f.Close()
}

// run runs the agent with the command line args; --help and --version
// print to stdout.
func run(args []string, stdout io.Writer) error {
	o := &options{}
	b := dcs.DefaultConfig()
	fs := defineFlags(o, &b)
	fs.SetOutput(stdout) // only --help prints: parse errors are returned
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q; all settings are flags", fs.Args())}
	}
	if o.version {
		fmt.Fprintln(stdout, "mysqlha-agent", version.Get())
		return nil
	}
	log, logErr := newLogger(o.logLevel)
	if logErr != nil {
		log, _ = newLogger("info")
	}
	defer log.Sync()
	log = log.With(zap.String("cluster", o.cfg.Cluster), zap.String("member", o.cfg.Name))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// The first act, before any step that can fail: an agent that cannot
	// start must not leave its mysqld writable (agent.FenceAtStart).
	mysqlTLS, tlsErr := o.mysqlTLSConfig()
	agent.FenceAtStart(ctx, o.dialer(mysqlTLS, b.RetryTimeout), o.localAddr, o.dialTimeout+b.RetryTimeout, log.Named("agent"))
	if logErr != nil {
		return logErr
	}
	if tlsErr != nil {
		return tlsErr
	}
	o, err := o.finish(fs, b)
	if err != nil {
		return err
	}
	routeKlog(log)
	defer klog.ClearLogger()
	if o.apiInsecure {
		log.Warn("--api-insecure: the HTTP API serves this member's data and backups to anyone who reaches it")
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := agent.NewMetrics(reg, o.cfg.Cluster, o.cfg.Name)

	store, labeler, closeDCS, err := openDCS(o, log)
	if err != nil {
		return err
	}
	defer closeDCS()

	dial := o.dialer(mysqlTLS, o.cfg.Bootstrap.RetryTimeout)
	serverTLS, err := o.apiTLS.Server()
	if err != nil {
		return err
	}
	clientTLS, err := o.apiTLS.Client()
	if err != nil {
		return err
	}
	peers := &http.Client{Transport: apiauth.Transport(&http.Transport{TLSClientConfig: clientTLS}, o.apiGuard.Token)}
	o.cfg.PeerCertRequired = o.apiTLS.CA != ""
	deps := agent.Deps{
		Store: store, LocalAddr: o.localAddr, Dial: dial, Labeler: labeler, Logger: log.Named("agent"),
		Metrics: metrics, PeerStatus: agent.HTTPPeerStatus(peers), PeerFailsafe: agent.HTTPPeerFailsafe(peers),
	}
	if o.killHung {
		deps.KillMySQL = mysqldproc.Kill
	}
	if o.datadir != "" {
		if deps.Rebuilder, err = o.rebuilder(); err != nil {
			return err
		}
		// No client Timeout: a backup streams for as long as it takes.
		deps.FetchClone = agent.HTTPFetchClone(&http.Client{Transport: peers.Transport})
		// Saved transactions go where a rebuild keeps them: the data
		// directory's top (backup.SavedPrefix is salvage.FilePrefix).
		deps.SaveTransactions = func(ctx context.Context, so salvage.SaveOptions) (salvage.Saved, error) {
			so.Dir = o.datadir
			return salvage.Save(ctx, so)
		}
	}
	if o.roleHook != "" {
		hook := rolehook.New(o.roleHook, o.roleHookTimeout, o.cfg.Cluster, o.cfg.Name, log.Named("hook"))
		go hook.Run(ctx)
		deps.RoleChanged = hook.Changed
	}
	a, err := agent.New(o.cfg, deps)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.cfg.ListenAddr, err)
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	// The health checks stay open for the kubelet and load balancers.
	handler := a.Handler(reg)
	srv := &http.Server{Handler: o.apiGuard.Protect(handler, agent.HealthPaths...), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	if o.healthListen != "" {
		hln, err := net.Listen("tcp", o.healthListen)
		if err != nil {
			return fmt.Errorf("--health-listen %s: %w", o.healthListen, err)
		}
		health := &http.Server{Handler: agent.HealthOnly(handler), ReadHeaderTimeout: 5 * time.Second}
		go health.Serve(hln)
		defer health.Close()
	}
	log.Info("agent started", zap.String("api", ln.Addr().String()), zap.String("dcs", o.dcsKind),
		zap.String("version", version.Get()))
	return a.Run(ctx)
}

// dialer connects to a mysqld as the agent's user; mysqlTLS may be nil.
func (o *options) dialer(mysqlTLS *tls.Config, retryTimeout time.Duration) agent.Dialer {
	return func(ctx context.Context, addr string) (agent.Database, error) {
		return mysqlctl.Connect(ctx, mysqlctl.Config{
			Addr: addr, User: o.user, PasswordFile: o.pwFile, DialTimeout: o.dialTimeout,
			ReadTimeout: 2 * retryTimeout, WriteTimeout: 2 * retryTimeout,
			ReplicationUsers: []string{o.cfg.ReplicationUser}, TLS: mysqlTLS,
		})
	}
}

// mysqlTLSConfig is the TLS of the agent's mysqld connections; nil
// without --mysql-tls-ca.
func (o *options) mysqlTLSConfig() (*tls.Config, error) {
	t := o.mysqlTLS
	if t.ca == "" {
		if t.cert != "" || t.key != "" {
			return nil, errors.New("--mysql-tls-cert/--mysql-tls-key need --mysql-tls-ca")
		}
		return nil, nil
	}
	pool, err := pemfiles.CAPool("--mysql-tls-ca", t.ca)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if t.cert != "" || t.key != "" {
		if cfg.Certificates, err = pemfiles.KeyPair("--mysql-tls-cert", "--mysql-tls-key", t.cert, t.key); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// openDCS builds the configured DCS store and, on Kubernetes, the pod labeler.
func openDCS(o *options, log *zap.Logger) (agent.Store, agent.Labeler, func(), error) {
	conn, err := connect.Open(connect.Settings{
		Kind: o.dcsKind, Kubeconfig: o.kubeconfig, Namespace: o.namespace, EtcdEndpoints: o.etcdEndpoints, Etcd: o.etcd,
		EtcdPrefix: o.etcdPrefix, Cluster: o.cfg.Cluster, Member: o.cfg.Name, Timeout: o.cfg.Bootstrap.RetryTimeout,
	}, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if conn.Kube == nil || !o.labelPods {
		return conn.Store, nil, conn.Close, nil
	}
	labels := podLabels{cluster: o.cfg.Cluster, podIP: o.podIP}
	if o.primaryService != "" {
		labels.route, err = podrole.NewPrimaryRoute(conn.Kube.EndpointSlices(o.namespace), o.namespace, o.primaryService, o.mysqlPort, log)
		if err != nil {
			conn.Close()
			return nil, nil, nil, fmt.Errorf("--primary-service: %w", err)
		}
	}
	client := podrole.Client{Pods: conn.Kube.Pods(o.namespace), Events: conn.Kube.Events(o.namespace)}
	labels.l, err = podrole.NewLabeler(client, o.namespace, podrole.LabelKeys{}, o.cfg.Name, log)
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	return conn.Store, labels, func() { labels.l.Close(); conn.Close() }, nil
}

// podLabels adapts podrole.Labeler to the agent's Labeler, and routes the
// primary Service (--primary-service) when its own pod becomes primary.
type podLabels struct {
	l       *podrole.Labeler
	cluster string
	route   *podrole.PrimaryRoute // nil without --primary-service
	podIP   string
}

// SetRole routes first, as the step clients wait on, and labels either
// way; the agent calls it again at its next iteration when either failed.
func (p podLabels) SetRole(ctx context.Context, pod string, r dcs.Role) error {
	var routeErr error
	if p.route != nil && r == dcs.RolePrimary {
		routeErr = p.route.To(ctx, pod, p.podIP)
	}
	return errors.Join(routeErr, p.l.SetRole(ctx, pod, p.cluster, r))
}

func (p podLabels) RemovePrimary(ctx context.Context, pod string) error {
	return p.l.RemovePrimary(ctx, pod)
}

func (p podLabels) Event(ctx context.Context, pod, eventType, reason, message string) {
	p.l.Event(ctx, pod, eventType, reason, message)
}

func (p podLabels) PodGone(ctx context.Context, pod string) (bool, error) {
	return p.l.PodGone(ctx, pod)
}

func (p podLabels) PodDown(ctx context.Context, pod, uid string) (string, error) {
	return p.l.PodDown(ctx, pod, uid)
}

// rebuilder is the local side of agentctl reinit: mariabackup reaches the
// local mysqld as the agent does.
func (o *options) rebuilder() (agent.Rebuilder, error) {
	src := backup.Source{Datadir: o.datadir, User: o.user}
	if strings.HasPrefix(o.localAddr, "/") {
		src.Socket = o.localAddr
	} else {
		host, port, err := net.SplitHostPort(o.localAddr)
		if err != nil {
			return nil, fmt.Errorf("--mysql-local-addr %q: %w", o.localAddr, err)
		}
		src.Host = host
		if src.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("--mysql-local-addr %q: port: %w", o.localAddr, err)
		}
	}
	if o.pwFile != "" {
		pw, err := os.ReadFile(o.pwFile)
		if err != nil {
			return nil, fmt.Errorf("--mysql-password-file: %w", err)
		}
		src.Password = strings.TrimRight(string(pw), "\r\n")
	}
	return backup.Local{Source: src}, nil
}
