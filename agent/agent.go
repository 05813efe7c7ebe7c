package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
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
}

// Agent runs the HA loop of one member.
type Agent struct {
	// self is this member's own settings, from its flags.
	self       Config
	store      Store
	dial       Dialer
	labeler    Labeler
	clock      clock.Clock
	log        *zap.Logger
	metrics    *Metrics
	peerStatus PeerStatus
	local      string

	// Owned by the loop goroutine.
	db      Database
	dialErr error      // why the last connection to the local mysqld failed
	peersMu sync.Mutex // peers is also used by promotion goroutines
	peers   map[string]Database
	// clusterConfig is the cluster's settings (timings, semi-sync, pause)
	// as stored in the DCS; self.Bootstrap until one has been read.
	clusterConfig   dcs.Config
	lastRenewStart  time.Time
	leaderlessSince time.Time
	// lastLeader is the last holder seen with a valid lock, for history:
	// an etcd leader key vanishes with its lease, taking the name along.
	lastLeader string
	role       dcs.Role
	lastAction failover.Kind
	errant     string
	lastLag    *time.Duration
	// failoverFrom is set when we won the lock from a lost leader, until the
	// promotion completes (for history and phase metrics).
	failoverFrom *failoverStart
	// instance is this process's agent instance id (the store's).
	instance string
	// clusterConfigGood: a stored cluster config has been read since
	// start, so clusterConfig holds the cluster's real settings, not just
	// our flags.
	clusterConfigGood bool
	// promotingSince is when we began holding the lock without being a
	// writable primary; zero otherwise.
	promotingSince time.Time
	// standDownUntil: we gave the lock up for a better member; do not race
	// again before then.
	standDownUntil time.Time
	duplicate      string // the last duplicate-identity finding, for logs
	// receiverStoppedSince is when a follower first saw its receiver
	// stopped (without an error) while pointing at the holder.
	receiverStoppedSince time.Time

	// deadline is shared with the watchdog: zero means "we may not write".
	deadlineMu sync.Mutex
	deadline   time.Time
	rearm      chan struct{}

	// Shared with the HTTP API.
	statusMu sync.Mutex
	status   MemberStatus
	cluster  *dcs.Cluster
	lastLoop time.Time
}

type failoverStart struct {
	from     string
	detected time.Time // when we first saw no valid leader
	acquired time.Time
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
		metrics: d.Metrics, peerStatus: d.PeerStatus, local: d.LocalAddr,
		peers: map[string]Database{}, clusterConfig: cfg.Bootstrap, instance: d.Store.Instance(),
		rearm: make(chan struct{}, 1),
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
	a.metrics.setRole(dcs.RoleUnknown)
	return a, nil
}

// Run runs the HA loop until ctx is cancelled, then hands the lock over (or
// releases it) if this member leads. A cancelled ctx is a clean stop.
func (a *Agent) Run(ctx context.Context) error {
	watchdogCtx, stopWatchdog := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatchdog()
	go a.watchdog(watchdogCtx)

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
		timer.Reset(max(a.clusterConfig.LoopWait-a.clock.Since(start), 0))
	}
}

// maxRedo bounds the iterations run back to back.
const maxRedo = 5

// shutdown runs one last iteration in which a leader hands over, bounded by
// ttl so that a pod deletion never waits on us for long.
func (a *Agent) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), a.clusterConfig.TTL)
	defer cancel()
	a.iterate(ctx, true)
	if a.hasDeadline() {
		// The hand-over did not happen: let the others take over now
		// rather than after ttl.
		a.release(ctx, "agent stopping")
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
		a.fenceSelf(ctx, "self-deadline", "lock deadline passed without a renewal")
	}

	a.ensureLocal(ctx)
	o := observed{}
	o.obs, o.localErr = a.observeLocal(ctx)
	cctx, cancel := a.callCtx(ctx)
	cl, err := a.store.Cluster(cctx)
	cancel()
	if err != nil {
		a.metrics.DCSErrors.WithLabelValues("read").Inc()
		a.log.Warn("reading the DCS failed", zap.Error(err))
		// Without a snapshot we cannot decide, but we can keep a lock we hold;
		// if that fails too, the watchdog fences at the deadline.
		if a.hasDeadline() {
			a.renew(ctx)
		}
		a.publishStatus(o.obs, o.localErr, nil, failover.Action{Kind: failover.Idle, Reason: "DCS unreachable"})
		return false
	}
	o.cl = cl
	a.adoptClusterConfig(cl)
	for _, p := range cl.Problems {
		a.log.Warn("unreadable DCS record", zap.Error(p))
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

// adoptClusterConfig takes the stored cluster config when it is readable and
// valid; otherwise the last good one stays in force.
func (a *Agent) adoptClusterConfig(cl *dcs.Cluster) {
	if cl.ConfigErr != nil {
		a.log.Error("stored cluster config is unreadable; keeping the last good one", zap.Bool("have_good_copy", a.clusterConfigGood), zap.Error(cl.ConfigErr))
		return
	}
	if err := cl.Config.Validate(); err != nil {
		a.log.Error("stored cluster config is invalid; keeping the last valid one", zap.Error(err))
		return
	}
	a.clusterConfig = cl.Config
	a.clusterConfigGood = true
}

func (a *Agent) reportDuplicate(ctx context.Context, dup string) {
	if dup == a.duplicate {
		return
	}
	a.duplicate = dup
	if dup == "" {
		a.metrics.DuplicateIdentity.Set(0)
		a.log.Info("no other live agent with our member name any more")
		return
	}
	a.metrics.DuplicateIdentity.Set(1)
	a.log.Error("another live agent runs with our member name: refusing to act, mysqld stays fenced", zap.String("duplicate", dup))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "DuplicateIdentity", "refusing to act: "+dup)
}

func (a *Agent) observeLocal(ctx context.Context) (mysqlctl.Observation, error) {
	if a.db == nil {
		return mysqlctl.Observation{}, fmt.Errorf("local mysqld not connected: %w", a.dialErr)
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	obs, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Warn("observing local mysqld failed", zap.Error(err))
		return obs, err
	}
	if r := obs.Replica; r != nil && r.SecondsBehind != nil && r.IOThread == mysqlctl.ThreadRunning {
		lag := time.Duration(*r.SecondsBehind) * time.Second
		a.lastLag = &lag
		a.metrics.LagSeconds.Set(lag.Seconds())
	} else if r == nil {
		a.lastLag = nil
		a.metrics.LagSeconds.Set(0)
	} else {
		a.metrics.LagSeconds.Set(-1)
	}
	return obs, nil
}

// snapshot assembles what failover.Decide needs. It probes the peers'
// mysqld while we hold the lock (to keep the cluster single-writable, and to
// promote safely), and fills o.peers with what it found.
func (a *Agent) snapshot(ctx context.Context, o *observed, stopping bool) failover.Snapshot {
	cl, obs, localErr := o.cl, o.obs, o.localErr
	now := a.clock.Now()
	s := failover.Snapshot{
		Self: a.self.Name, SelfInstance: a.instance, SelfAddr: a.self.MySQLAddr, Flavor: a.flavor(), Now: now,
		Paused: a.clusterConfig.Paused, ConfigUnknown: cl.ConfigErr != nil && !a.clusterConfigGood,
		Initialized: cl.Initialized != nil, ShuttingDown: stopping,
		Deadline: a.effectiveDeadline(), Grace: a.clusterConfig.LoopWait * 2, MaxLag: a.clusterConfig.MaximumLagOnFailover,
		PromotionTimeout: a.promotionTimeout(),
		LocalUp:          localErr == nil, LocalDown: errors.Is(localErr, mysqlctl.ErrDown),
		LocalWritable: localErr == nil && obs.Status.Writable(),
	}
	if r := obs.Replica; localErr == nil && r != nil {
		s.LocalSource = net.JoinHostPort(r.SourceHost, strconv.Itoa(r.SourcePort))
	}
	if cl.Leader != nil {
		s.Leader, s.LeaderInstance, s.LeaderExpired = cl.Leader.Holder, cl.Leader.Instance, cl.Leader.Expired
	}
	if s.Leader == "" || s.LeaderExpired {
		if a.leaderlessSince.IsZero() {
			a.leaderlessSince = now
		}
	} else {
		a.leaderlessSince = time.Time{}
		a.lastLeader = s.Leader
	}
	s.LeaderlessSince = a.leaderlessSince
	if f := a.failoverFrom; f != nil {
		s.FormerLeader = f.from
	}
	if sw := cl.Switchover; sw != nil && sw.Err == nil {
		s.Switchover = &failover.SwitchoverRequest{From: sw.From, To: sw.To, ScheduledAt: sw.ScheduledAt, Force: sw.Force}
	}
	s.SwitchoverUnreadable = cl.Switchover != nil && cl.Switchover.Err != nil
	s.Duplicate = a.duplicateIdentity(ctx, cl)

	holding := s.Leader == a.self.Name && s.LeaderInstance == a.instance && !s.LeaderExpired && a.hasDeadline()
	if holding && !(s.LocalWritable && s.LocalSource == "") {
		if a.promotingSince.IsZero() {
			a.promotingSince = now
		}
	} else {
		a.promotingSince = time.Time{}
	}
	s.PromotingSince = a.promotingSince

	self := a.selfMember(obs, localErr)
	if now.Before(a.standDownUntil) {
		self.Hold = "it gave the lock up to a better member moments ago"
	}
	s.Members = append(s.Members, self)
	// Peers' live status matters when choosing who takes over, or whether
	// to unfence; otherwise their records suffice.
	promoting := !s.PromotingSince.IsZero()
	wantPeers := s.Leader == "" || s.LeaderExpired || s.Switchover != nil || stopping || promoting
	var live map[string]*MemberStatus
	if wantPeers {
		live = a.fetchPeers(ctx, cl)
	}
	// While we hold the lock, every peer's mysqld is probed: a promotion
	// waits up to retry_timeout for an answer; a running primary's check
	// for writable peers is best effort each iteration, on a short bound
	// so that a hung peer does not delay the renewal that follows.
	if holding && localErr == nil {
		bound := a.clusterConfig.RetryTimeout / 4
		if promoting {
			bound = a.clusterConfig.RetryTimeout
		}
		o.peers = a.probePeers(ctx, cl, bound)
	}
	for _, m := range cl.Members {
		if m.Name == a.self.Name {
			continue
		}
		fm := toCandidate(m, live, wantPeers)
		if p, ok := o.peers[m.Name]; ok {
			fm.Observed, fm.Reachable, fm.Down = true, p.reachable, p.down
			if p.reachable {
				fm.Writable, fm.PullingFrom = p.obs.Status.Writable(), pullingFrom(p.obs)
				fm.Executed = p.obs.Status.GTIDExecuted
				if r := p.obs.Replica; r != nil {
					fm.Retrieved = r.RetrievedGTID
				}
			}
		}
		s.Members = append(s.Members, fm)
	}
	return s
}

// promotionTimeout bounds how long a holder may stay unable to become
// writable (say, a relay log that never finishes applying) before it gives
// the lock up: long enough to apply the largest backlog a candidate may
// have (maximum_lag_on_failover), with room to spare.
func (a *Agent) promotionTimeout() time.Duration {
	return max(time.Minute, 2*a.clusterConfig.MaximumLagOnFailover+a.clusterConfig.TTL)
}

func (a *Agent) selfMember(obs mysqlctl.Observation, localErr error) failover.Member {
	m := failover.Member{
		Name: a.self.Name, Fresh: true, Healthy: localErr == nil, NoFailover: a.self.NoFailover,
		Priority: a.self.FailoverPriority, Errant: a.errant != "", Executed: obs.Status.GTIDExecuted, Lag: a.lastLag,
	}
	if r := obs.Replica; r != nil {
		m.Retrieved = r.RetrievedGTID
		m.ReplicationBroken = r.Broken()
	}
	return m
}

// toCandidate turns a member record (failover.FromRecord) and, when
// fetched, its live status into what failover ranks: the live status
// overrides the record's health, errant flag, GTIDs and replication state.
// A peer asked over HTTP that did not answer is stale.
func toCandidate(m dcs.Member, live map[string]*MemberStatus, asked bool) failover.Member {
	fm := failover.FromRecord(m)
	if !asked || m.APIURL == "" {
		return fm
	}
	st, ok := live[m.Name]
	if !ok || st == nil {
		fm.Fresh = false
		return fm
	}
	fm.Healthy = st.Healthy
	fm.Errant = st.Errant != ""
	fm.Executed, fm.Retrieved = st.GTIDExecuted, st.GTIDRetrieved
	fm.ReplicationBroken = st.Replication == dcs.ReplicationBroken.String()
	return fm
}
