package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Deps are the agent's collaborators; cmd/agent builds them.
type Deps struct {
	Store Store
	// LocalAddr is where the agent reaches its own mysqld (often a socket
	// or 127.0.0.1), which may differ from Config.MySQLAddr.
	LocalAddr string
	Dial      Dialer
	Labeler   Labeler
	Clock     clock.Clock
	Logger    *zap.Logger
	Metrics   *Metrics
	// PeerStatus fetches peers' live status; HTTPPeerStatus by default.
	PeerStatus PeerStatus
	// PeerFailsafe asks a peer to confirm us as leader (failsafe mode);
	// HTTPPeerFailsafe by default.
	PeerFailsafe PeerFailsafe
	// KillMySQL kills the local mysqld, found by its pid file, and returns
	// once it is gone; nil when this agent cannot see its process.
	KillMySQL func(ctx context.Context, pidFile string) (pid int, err error)
	// Rebuilder rebuilds this member from a donor, and streams backups as
	// one (agentctl reinit); nil disables both.
	Rebuilder Rebuilder
	// FetchClone opens a donor's backup stream; HTTPFetchClone by default.
	FetchClone FetchClone
	// SaveTransactions saves a diverged member's extra transactions before
	// its automatic rebuild; nil: such a member is never rebuilt
	// automatically.
	SaveTransactions SaveTransactions
	// RoleChanged is told every role this member takes (primary, replica,
	// none), after its pod is relabelled; it must not block (rolehook
	// queues the operator's executable); nil: nobody is told.
	RoleChanged func(role string)
}

// Agent runs the HA loop of one member.
type Agent struct {
	// self is this member's own settings, from its flags; the rest of
	// this block is what New was given.
	self         Config
	store        Store
	dial         Dialer
	labeler      Labeler
	roleChanged  func(role string)
	clock        clock.Clock
	log          *zap.Logger
	metrics      *Metrics
	peerStatus   PeerStatus
	peerFailsafe PeerFailsafe
	killMySQL    func(ctx context.Context, pidFile string) (int, error)
	rebuilder    Rebuilder
	fetchClone   FetchClone
	saveTxns     SaveTransactions
	local        string
	// instance is this process's agent instance id (the store's).
	instance string

	// Owned by the loop goroutine: its connections, the cluster's
	// settings, and what it remembers between iterations.
	db      Database
	dialErr error      // why the last connection to the local mysqld failed
	peersMu sync.Mutex // peers is also used by promotion goroutines
	peers   map[string]Database
	// clusterConfig is the cluster's settings (timings, semi-sync, pause)
	// as stored in the DCS; self.Bootstrap until one has been read.
	// clusterConfigGood: a stored cluster config has been read since
	// start, so clusterConfig holds the cluster's real settings, not just
	// our flags.
	clusterConfig     dcs.Config
	clusterConfigGood bool
	lockMemory
	serverMemory

	// deadline is shared with the watchdog: zero means "we may not write".
	// sharedConfig is clusterConfig as the loop last adopted it, for the
	// watchdog's and the HTTP API's goroutines (the loop's own field may
	// change under them at run time: agentctl set-config).
	sharedConfig atomic.Pointer[dcs.Config]
	deadlineMu   sync.Mutex
	deadline     time.Time
	rearm        chan struct{}
	// pushDeadman wakes the deadmanPusher when the deadline moves;
	// deadmanArmed: this process armed the dead-man switch since the
	// deadline was last cleared.
	pushDeadman  chan struct{}
	deadmanArmed atomic.Bool

	// Shared with the HTTP API.
	statusMu sync.Mutex
	status   MemberStatus
	failsafe failover.FailsafeView
	promise  failsafePromise
	cluster  *dcs.Cluster
	lastLoop time.Time
}

// lockMemory is what the loop remembers between iterations about the lock
// and the cluster's leadership.
type lockMemory struct {
	lastRenewStart  time.Time
	leaderlessSince time.Time
	// gone are the members removed() found scaled away, and goneAsked
	// when each stale member was last asked about.
	gone      map[string]bool
	goneAsked map[string]time.Time
	// lastGTIDs are our mysqld's executed and retrieved GTIDs as it last
	// answered (knownGTIDs).
	lastGTIDs [2]string
	// mysqlSeen: our mysqld has answered since this agent started.
	mysqlSeen bool
	// lastLeader is the last holder seen with a valid, readable lock, for
	// history: an etcd leader key vanishes with its lease, taking the name
	// along, and an unreadable lock names no member (dcs.UnknownHolder).
	lastLeader string
	lastAction failover.Kind
	// lastCluster is the last DCS snapshot read.
	lastCluster *dcs.Cluster
	// failoverFrom is set when we won the lock from a lost leader, until the
	// promotion completes (for history and phase metrics).
	failoverFrom *failoverStart
	// promotingSince is when we began holding the lock without being a
	// writable primary; zero otherwise.
	promotingSince time.Time
	// standDownUntil: we gave the lock up for a better member; do not race
	// again before then.
	standDownUntil time.Time
	// handoverDeadline bounds all the write stops of one switchover
	// request (by its version), however many attempts it takes.
	handoverDeadline switchoverDeadline
	// acknowledgers is, from our term as a lossless primary, the members
	// that may hold an acknowledged write of ours
	// (failover.TrackAcknowledgers); nil until tracked in this term.
	acknowledgers map[string]string
	// failsafeActive: our deadline was last moved by failsafe
	// confirmations.
	failsafeActive bool
	// watch follows the holder's liveness.
	watch deathWatch
	// tookFromDeadPod is the holder we took the lock from on the
	// kubelet's word, until our promotion ends (deadPeer); cleared with
	// promotingSince.
	tookFromDeadPod deadPod
	// awaitedHolder is the lock holder we wait on to turn writable before
	// judging our history against it; "" when not waiting.
	awaitedHolder string
	duplicate     string // the last duplicate-identity finding, for logs
}

// serverMemory is what the loop remembers between iterations about our
// own member and its mysqld.
type serverMemory struct {
	role   dcs.Role
	errant string
	// misconfigured names the settings our mysqld lacks to serve as a
	// source (it is then never promoted); "" when it has them.
	misconfigured string
	// lag follows our replication delay (lag.go).
	lag replicaLag
	// receiverStoppedSince is when a follower first saw its receiver
	// stopped (without an error) while pointing at the holder.
	receiverStoppedSince time.Time
	// localHungSince is when our mysqld first failed to answer without
	// refusing; zero while it answers or is down. pidFile is its
	// @@pid_file, last read; cannotKill: a kill failed since it last
	// answered (its process is not visible from here, say).
	localHungSince time.Time
	pidFile        string
	cannotKill     bool
	// rebuild is the running rebuild of this member (agentctl reinit).
	rebuild *rebuildRun
	// restarting is the running restart of our mysqld (agentctl restart).
	restarting *restartRun
	// healing is self-healing's memory (heal.go).
	healing healMemory
	// readsOff is why we serve no reads, as last announced (reads.go).
	readsOff string
	// stopping: the agent is in its last iterations (SIGTERM); the record
	// it publishes then carries failover.TagStopped. failedTargets are the
	// members a hand-over of this shutdown did not complete with.
	stopping      bool
	failedTargets []string
}

type failoverStart struct {
	from     string
	detected time.Time // when we first saw no valid leader
	acquired time.Time
	reason   string // for the history; "" for the plain "leader lost"
}

// historyReason is the reason its history entry gives.
func (f *failoverStart) historyReason() string {
	if f.reason == "" {
		return "leader lost"
	}
	return f.reason
}

// New checks cfg and builds an agent. It does not touch the network.
func New(cfg Config, d Deps) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid agent configuration:\n%w", err)
	}
	if d.Store == nil || d.Dial == nil || d.Metrics == nil || d.LocalAddr == "" {
		return nil, errors.New("agent: Store, Dial, Metrics and LocalAddr are required")
	}
	a := &Agent{
		self: cfg, store: d.Store, dial: d.Dial, labeler: d.Labeler, clock: d.Clock, log: d.Logger,
		metrics: d.Metrics, peerStatus: d.PeerStatus, local: d.LocalAddr, killMySQL: d.KillMySQL, peerFailsafe: d.PeerFailsafe,
		peers: map[string]Database{}, clusterConfig: cfg.Bootstrap, instance: d.Store.Instance(),
		rearm: make(chan struct{}, 1), pushDeadman: make(chan struct{}, 1), rebuilder: d.Rebuilder, fetchClone: d.FetchClone,
		saveTxns: d.SaveTransactions, roleChanged: d.RoleChanged,
	}
	a.gone, a.goneAsked = map[string]bool{}, map[string]time.Time{}
	if a.fetchClone == nil {
		a.fetchClone = HTTPFetchClone(&http.Client{})
	}
	if a.labeler == nil {
		a.labeler = noLabels{}
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	if a.peerStatus == nil {
		a.peerStatus = HTTPPeerStatus(&http.Client{})
	}
	if a.peerFailsafe == nil {
		a.peerFailsafe = HTTPPeerFailsafe(&http.Client{})
	}
	a.shareConfig()
	a.metrics.setRole(dcs.RoleUnknown)
	return a, nil
}

// Run runs the HA loop until ctx is cancelled, then hands the lock over (or
// releases it) if this member leads. A cancelled ctx is a clean stop.
func (a *Agent) Run(ctx context.Context) error {
	watchdogCtx, stopWatchdog := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatchdog()
	go a.watchdog(watchdogCtx)
	go a.deadmanPusher(watchdogCtx)

	// Never writable until we hold the lock: fence at start, whatever the
	// state mysqld was left in.
	a.ensureLocal(ctx)
	if a.db != nil {
		if err := a.fenceAndKill(ctx, a.db); err != nil {
			a.log.Warn("fencing mysqld at start-up failed", zap.Error(err))
		}
	}

	timer := a.clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			a.shutdown()
			return nil
		case <-timer.C():
		case <-a.store.Changes():
		}
		start := a.clock.Now()
		// A step that changed what the next decision depends on (a lock won,
		// a peer fenced) asks for another iteration at once; bounded, so a
		// decision that never settles still leaves room for the timer.
		for redo, n := true, 0; redo && n < maxRedo && ctx.Err() == nil; n++ {
			redo = a.iterate(ctx, false)
		}
		// The period is loop_wait from start to start, whatever an
		// iteration took, so the lock is renewed at the rate the timing
		// rule assumes.
		timer.Reset(max(a.loopDelay()-a.clock.Since(start), 0))
	}
}

// loopDelay is the period of the loop: loop_wait, or a quarter of it while
// the holder is lost, so that a death is confirmed (or its pod seen
// stopped), and the lock taken over, within about one window of it.
func (a *Agent) loopDelay() time.Duration {
	if !a.watch.lostSince.IsZero() {
		return a.clusterConfig.LoopWait / 4
	}
	return a.clusterConfig.LoopWait
}

// maxRedo bounds the iterations run back to back.
const maxRedo = 5

// maxHandovers and shutdownTTLs bound a stopping leader's hand-over
// attempts and their time.
const (
	maxHandovers = 3
	shutdownTTLs = 3
)

// shutdown runs the last iterations, in which a leader hands over: to the
// best replica and, when that one does not catch up in time (a member that
// has just restarted and is still applying), to the next best, at most
// maxHandovers in all and within shutdownTTLs ttls, so that a pod deletion
// never waits on us for long (the server's preStop hook waits up to 45 s).
func (a *Agent) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTTLs*a.clusterConfig.TTL)
	defer cancel()
	a.stopping = true
	for n := 0; n < maxHandovers && ctx.Err() == nil; n++ {
		failed := len(a.failedTargets)
		a.iterate(ctx, true)
		if !a.hasDeadline() || len(a.failedTargets) == failed {
			break // handed over, released, or nothing more to try
		}
	}
	if a.hasDeadline() {
		// The hand-over did not happen: let the others take over now
		// rather than after ttl.
		a.release(ctx, "agent stopping", false)
	}
	a.setRole(ctx, dcs.RoleUnknown)
	for _, p := range a.peers {
		closeDB(p)
	}
	a.log.Info("agent stopped")
}

func (a *Agent) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.clusterConfig.RetryTimeout)
}

// ensureLocal connects to the local mysqld if not connected yet.
func (a *Agent) ensureLocal(ctx context.Context) {
	if a.db != nil {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	db, err := a.dial(cctx, a.local)
	a.dialErr = err
	if err != nil {
		a.log.Warn("local mysqld not reachable", zap.String("addr", a.local), zap.Error(err))
		return
	}
	a.db = db
	a.log.Info("connected to local mysqld", zap.String("addr", a.local), zap.Stringer("flavor", db.Server().Flavor),
		zap.Stringer("version", db.Server().Version))
}

func (a *Agent) flavor() gtid.Flavor {
	if a.db != nil && a.db.Server().Flavor == gtid.MySQL {
		return gtid.MySQL
	}
	return gtid.MariaDB
}

// iterate is one observe -> decide -> act cycle. It reports whether the
// action asks for another iteration at once.
func (a *Agent) iterate(ctx context.Context, stopping bool) (redo bool) {
	start := a.clock.Now()
	defer func() {
		a.metrics.LoopDuration.Observe(a.clock.Since(start).Seconds())
		a.statusMu.Lock()
		a.lastLoop = a.clock.Now()
		a.statusMu.Unlock()
	}()
	// A holder that wakes past its deadline fences before any other I/O.
	if a.pastDeadline() {
		a.fenceSelf(ctx, fenceKindSelfDeadline, "lock deadline passed without a renewal")
	}

	a.ensureLocal(ctx)
	a.healing.reason = "" // follow's heal sets it again while it applies
	o := observed{}
	o.obs, o.localErr = a.observeLocal(ctx)
	cctx, cancel := a.callCtx(ctx)
	cl, err := a.store.Cluster(cctx)
	cancel()
	if err != nil {
		a.metrics.dcsFailed(dcsOpRead)
		a.log.Warn("reading the DCS failed", zap.Error(err))
		// Without a snapshot we cannot decide, but we can keep a lock we hold;
		// if that fails too, the watchdog fences at the deadline.
		if a.hasDeadline() {
			a.renew(ctx)
		}
		a.publishStatus(o.obs, o.localErr, nil, failover.Action{Kind: failover.Idle, Reason: "DCS unreachable"})
		return false
	}
	o.cl, a.lastCluster = cl, cl
	a.adoptClusterConfig(cl)
	for _, p := range cl.Problems {
		a.log.Warn("unreadable DCS record", zap.Error(p))
	}
	if a.handleReinit(ctx, cl) {
		// Being rebuilt: no lock, no repointing; keep the record fresh.
		a.publishStatus(o.obs, o.localErr, cl, failover.Action{Kind: failover.Idle, Reason: "rebuilding from a donor (agentctl reinit)"})
		a.publishMember(ctx, cl, o.obs, o.localErr)
		return false
	}
	if a.handleRestart(ctx, cl) {
		// Restarting mysqld: no lock (a holder refuses), no repointing
		// while it goes down and comes back.
		a.publishStatus(o.obs, o.localErr, cl, failover.Action{Kind: failover.Idle, Reason: "restarting mysqld (agentctl restart)"})
		a.publishMember(ctx, cl, o.obs, o.localErr)
		return false
	}

	snap := a.snapshot(ctx, &o, stopping)
	action := failover.Decide(snap)
	if action.Kind != a.lastAction {
		a.log.Info("decision", zap.Stringer("action", action.Kind), zap.String("target", action.Target),
			zap.String("reason", action.Reason))
		a.lastAction = action.Kind
	}
	a.reportDuplicate(ctx, snap.Duplicate)
	roleBefore, deadlineBefore := a.role, a.hasDeadline()
	redo = a.act(ctx, action, o)
	if a.role != roleBefore || a.hasDeadline() != deadlineBefore {
		// The action changed mysqld (promoted, fenced, repointed): publish
		// what it is now. In steady state the first observation stands, so
		// an iteration costs one observe pass, not two.
		o.obs, o.localErr = a.observeLocal(ctx)
	}
	a.publishStatus(o.obs, o.localErr, cl, action)
	if action.Kind != failover.Refuse {
		// An agent refusing to act must not overwrite the real member's record.
		a.publishMember(ctx, cl, o.obs, o.localErr)
	}
	return redo
}

// shareConfig publishes clusterConfig to the other goroutines.
func (a *Agent) shareConfig() {
	c := a.clusterConfig
	a.sharedConfig.Store(&c)
}

// config is the cluster config for code that may run outside the loop's
// goroutine.
func (a *Agent) config() dcs.Config { return *a.sharedConfig.Load() }

// adoptClusterConfig takes the stored cluster config when it is readable and
// valid; otherwise the last good one stays in force. Until a config is
// stored, that is our bootstrap flags, which the bootstrapping member
// stores, not the defaults a snapshot shows then.
func (a *Agent) adoptClusterConfig(cl *dcs.Cluster) {
	if cl.ConfigVersion == "" && cl.ConfigErr == nil {
		return
	}
	if cl.ConfigErr != nil {
		a.log.Error("stored cluster config is unreadable; keeping the last good one", zap.Bool("have_good_copy", a.clusterConfigGood), zap.Error(cl.ConfigErr))
		return
	}
	if err := cl.Config.Validate(); err != nil {
		a.log.Error("stored cluster config is invalid; keeping the last valid one", zap.Error(err))
		return
	}
	// An operator changes it at run time (agentctl set-config): every
	// setting is read from clusterConfig where it is used, so the change is
	// in force from here on. Written only when it changed, since the
	// watchdog and the HTTP API read it from other goroutines.
	if cl.Config != a.clusterConfig {
		a.log.Info("adopted a changed cluster config", zap.Strings("changes", a.clusterConfig.Changes(cl.Config)))
		a.clusterConfig = cl.Config
		a.shareConfig()
	}
	a.clusterConfigGood = true
}
