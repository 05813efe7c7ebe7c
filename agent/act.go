package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// act carries out one decision. Every step is idempotent.
func (a *Agent) act(ctx context.Context, action failover.Action, cl *dcs.Cluster, obs mysqlctl.Observation, localErr error) {
	switch action.Kind {
	case failover.FenceSelf:
		a.fenceSelf(ctx, "self", action.Reason)
	case failover.ReleaseLock:
		a.release(ctx, action.Reason)
	case failover.Bootstrap:
		if a.acquire(ctx, cl) {
			a.bootstrap(ctx, cl)
		}
	case failover.Acquire:
		from := a.lastLeader
		if cl.Leader != nil && cl.Leader.Holder != dcs.UnknownHolder {
			from = cl.Leader.Holder
		}
		if from == a.cfg.Name {
			from = ""
		}
		detected := a.leaderlessSince
		if a.acquire(ctx, cl) {
			a.failoverFrom = &failoverStart{from: from, detected: detected, acquired: a.clock.Now()}
			a.metrics.Failovers.Inc()
			a.labeler.Event(ctx, a.cfg.Name, eventNormal, "LeaderLost", fmt.Sprintf("took the lock from lost leader %q: %s", from, action.Reason))
			a.lead(ctx, cl, obs, false)
		}
	case failover.Lead:
		if localErr != nil {
			// Our mysqld does not answer: keep the lock, change nothing.
			if a.clock.Since(a.lastRenewStart) >= a.config.LoopWait/2 || !a.hasDeadline() {
				a.renew(ctx)
			}
			return
		}
		a.lead(ctx, cl, obs, action.RenewOnly)
	case failover.Follow:
		a.follow(ctx, cl, obs, action.Target)
	case failover.Switchover:
		a.handover(ctx, cl, action.Target, action.Reason)
	case failover.RejectSwitchover:
		a.rejectSwitchover(ctx, cl, action.Reason)
	case failover.ClearRequest:
		a.clearRequest(ctx, cl, action.Reason)
		a.lead(ctx, cl, obs, false)
	case failover.Idle, failover.WaitForBetter:
		// Never writable without the lock (unless paused: hands off).
		if localErr == nil && obs.Status.Writable() && !cl.Config.Paused && !a.hasDeadline() {
			a.fenceSelf(ctx, "self", "writable without holding the lock")
		}
	}
}

// renew extends our lock. On success the deadline moves to start + ttl -
// safety_margin, measured from the start of the request.
func (a *Agent) renew(ctx context.Context) bool {
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	err := a.store.RenewLeader(cctx, a.config.TTL)
	cancel()
	if err != nil {
		a.metrics.RenewFailures.Inc()
		a.metrics.DCSErrors.WithLabelValues("renew").Inc()
		if errors.Is(err, dcs.ErrNotLeader) {
			a.log.Warn("lost the leader lock", zap.Error(err))
			a.fenceSelf(ctx, "self", "lost the leader lock")
			return false
		}
		a.log.Warn("renewing the leader lock failed", zap.Error(err))
		return false
	}
	a.metrics.RenewLatency.Observe(a.clock.Since(start).Seconds())
	a.lastRenewStart = start
	a.setDeadline(start.Add(a.config.TTL - a.config.SafetyMargin))
	a.metrics.IsLeader.Set(1)
	return true
}

func (a *Agent) acquire(ctx context.Context, cl *dcs.Cluster) bool {
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	err := a.store.AcquireLeader(cctx, a.config.TTL)
	cancel()
	if err != nil {
		if !errors.Is(err, dcs.ErrHeld) && !errors.Is(err, dcs.ErrConflict) {
			a.metrics.DCSErrors.WithLabelValues("acquire").Inc()
		}
		a.log.Info("did not win the leader lock", zap.Error(err))
		return false
	}
	a.lastRenewStart = start
	a.setDeadline(start.Add(a.config.TTL - a.config.SafetyMargin))
	a.metrics.IsLeader.Set(1)
	a.log.Info("won the leader lock")
	return true
}

// fenceSelf makes the local mysqld read-only and kills its clients. The
// deadline is cleared only once the fence holds. It returns why it failed.
func (a *Agent) fenceSelf(ctx context.Context, kind, reason string) error {
	a.metrics.FencingActions.WithLabelValues(kind).Inc()
	a.metrics.IsLeader.Set(0)
	if a.db == nil {
		a.log.Error("cannot fence: local mysqld not connected", zap.String("reason", reason))
		return fmt.Errorf("local mysqld not connected: %w", a.dialErr)
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.db.Fence(cctx); err != nil {
		a.log.Error("fencing local mysqld failed", zap.String("reason", reason), zap.Error(err))
		return err
	}
	if _, err := a.db.KillClients(cctx); err != nil {
		a.log.Warn("killing client sessions failed", zap.Error(err))
	}
	wasLeading := a.hasDeadline()
	a.setDeadline(time.Time{})
	if wasLeading || a.role == RolePrimary {
		a.log.Warn("fenced local mysqld", zap.String("reason", reason))
		a.labeler.Event(ctx, a.cfg.Name, eventWarning, "Fenced", reason)
	}
	a.setRole(ctx, RoleNone)
	return nil
}

func (a *Agent) release(ctx context.Context, reason string) {
	if a.hasDeadline() {
		// Giving the lock up lets another member promote at once: only when
		// our mysqld is read-only or provably not running.
		if err := a.fenceSelf(ctx, "self", reason); err != nil && !errors.Is(err, mysqlctl.ErrDown) {
			a.log.Error("not releasing the leader lock: mysqld could not be fenced and is not known to be down", zap.Error(err))
			return
		}
	}
	a.setDeadline(time.Time{})
	a.metrics.IsLeader.Set(0)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ReleaseLeader(cctx); err != nil && !errors.Is(err, dcs.ErrNotLeader) {
		a.metrics.DCSErrors.WithLabelValues("release").Inc()
		a.log.Warn("releasing the leader lock failed", zap.Error(err))
		return
	}
	a.log.Warn("released the leader lock", zap.String("reason", reason))
	a.labeler.Event(ctx, a.cfg.Name, eventWarning, "Demoted", "released the leader lock: "+reason)
	a.setRole(ctx, RoleNone)
}

// bootstrap records the cluster's config and identity after winning the
// lock of an empty cluster; lead() then makes us writable.
func (a *Agent) bootstrap(ctx context.Context, cl *dcs.Cluster) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if cl.ConfigVersion == "" {
		if err := a.store.SetConfig(cctx, a.cfg.Bootstrap, ""); err != nil && !errors.Is(err, dcs.ErrConflict) {
			a.log.Warn("storing the bootstrap config failed", zap.Error(err))
		}
	}
	st, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Warn("observing mysqld for bootstrap failed", zap.Error(err))
		return
	}
	id := st.Status.ServerUUID
	if id == "" {
		id = fmt.Sprintf("mariadb-server-%d", st.Status.ServerID)
	}
	err = a.store.SetInitialized(cctx, dcs.Initialized{ClusterID: id, FirstGTID: st.Status.GTIDExecuted, Bootstrapper: a.cfg.Name})
	if err != nil && !errors.Is(err, dcs.ErrExists) {
		a.log.Warn("recording the cluster identity failed", zap.Error(err))
		return
	}
	a.log.Info("bootstrapped the cluster", zap.String("cluster_id", id))
	a.lead(ctx, cl, st, false)
}

// lead renews the lock and, unless renewOnly, makes sure we are a writable
// primary, promoting if we are not yet.
func (a *Agent) lead(ctx context.Context, cl *dcs.Cluster, obs mysqlctl.Observation, renewOnly bool) {
	if a.clock.Since(a.lastRenewStart) >= a.config.LoopWait/2 || !a.hasDeadline() {
		if !a.renew(ctx) {
			return
		}
	}
	if renewOnly && cl.Config.Paused {
		return
	}
	if obs.Status.Writable() && obs.Replica == nil {
		a.steadyPrimary(ctx, obs)
		return
	}
	a.promote(ctx, cl)
}

// steadyPrimary keeps a running primary's settings right.
func (a *Agent) steadyPrimary(ctx context.Context, obs mysqlctl.Observation) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	want := a.config.SemiSync != dcs.SemiSyncOff
	if obs.Status.SemiSync.SourceEnabled != want || (want && obs.Status.SemiSync.SourceTimeout != a.semiSyncTimeout()) {
		if err := a.db.SetSemiSyncSource(cctx, want, a.semiSyncTimeout(), 1); err != nil {
			a.log.Warn("setting source semi-sync failed", zap.Error(err))
		}
	}
	a.setRole(ctx, RolePrimary)
}

func (a *Agent) semiSyncTimeout() time.Duration {
	if a.config.SemiSync == dcs.SemiSyncStrict {
		// Effectively never fall back to asynchronous.
		return 365 * 24 * time.Hour
	}
	if a.cfg.SemiSyncTimeout > 0 {
		return a.cfg.SemiSyncTimeout
	}
	return 10 * time.Second
}

// promote runs the promotion steps of DESIGN.md section 3 in order. Each is
// idempotent and derived from what is observed now, not remembered, so a
// crash at any line is repaired by the next attempt.
func (a *Agent) promote(ctx context.Context, cl *dcs.Cluster) {
	peers := a.reachablePeers(ctx, cl)
	// 1. Stop the receivers of replicas still pulling from someone else, so a
	//    semi-sync old source can acknowledge nothing more.
	a.forEachPeer(peers, func(name string, p Database, o mysqlctl.Observation) {
		if r := o.Replica; r != nil && r.IOThread != mysqlctl.ThreadStopped && !a.isMe(r.SourceHost, r.SourcePort) {
			cctx, cancel := a.callCtx(ctx)
			defer cancel()
			if err := p.StopReplicationIO(cctx); err != nil {
				a.log.Warn("stopping a replica's receiver failed", zap.String("member", name), zap.Error(err))
				return
			}
			a.metrics.FencingActions.WithLabelValues("replica-receiver").Inc()
		}
	})
	// 2. Fence any other writable member: an old source that still answers.
	a.forEachPeer(peers, func(name string, p Database, o mysqlctl.Observation) {
		if !o.Status.Writable() {
			return
		}
		cctx, cancel := a.callCtx(ctx)
		defer cancel()
		if err := p.Fence(cctx); err != nil {
			a.log.Error("fencing the old source failed", zap.String("member", name), zap.Error(err))
			return
		}
		p.KillClients(cctx)
		a.metrics.FencingActions.WithLabelValues("remote-source").Inc()
		a.log.Warn("fenced the old source", zap.String("member", name))
	})
	// 3. Drop the primary label of every other member, in parallel.
	var wg sync.WaitGroup
	for _, m := range cl.Members {
		if m.Name == a.cfg.Name {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := a.callCtx(ctx)
			defer cancel()
			if err := a.labeler.RemovePrimary(cctx, m.Name); err != nil {
				a.log.Warn("removing an old primary label failed", zap.String("member", m.Name), zap.Error(err))
			}
		}()
	}
	wg.Wait()
	// 4. Apply the whole relay log: stop our own receiver (its source is
	//    fenced now), then wait for what it retrieved. A long apply spans
	//    iterations, so the lock keeps being renewed meanwhile.
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.db.StopReplicationIO(cctx); err != nil {
		a.log.Warn("stopping our receiver failed", zap.Error(err))
		return
	}
	obs, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Warn("observing before promotion failed", zap.Error(err))
		return
	}
	if r := obs.Replica; r != nil && r.RetrievedGTID != "" {
		if err := a.db.WaitForGTID(cctx, r.RetrievedGTID, a.config.RetryTimeout/2); err != nil {
			a.log.Info("relay log not applied yet; promotion continues next iteration", zap.Error(err))
			return
		}
	}
	// 5. Promote: forget the source, switch semi-sync sides, become writable,
	//    provided the deadline leaves room for the statements.
	if err := a.db.ResetReplication(cctx); err != nil {
		a.log.Warn("resetting replication failed", zap.Error(err))
		return
	}
	if err := a.db.SetSemiSyncReplica(cctx, false); err != nil {
		a.log.Warn("switching replica semi-sync off failed", zap.Error(err))
	}
	if a.config.SemiSync != dcs.SemiSyncOff {
		if err := a.db.SetSemiSyncSource(cctx, true, a.semiSyncTimeout(), 1); err != nil {
			a.log.Warn("switching source semi-sync on failed", zap.Error(err))
			return
		}
	}
	if !a.canWriteFor(a.config.RetryTimeout) {
		a.log.Warn("not unfencing: too close to the lock deadline")
		return
	}
	if err := a.db.Unfence(cctx); err != nil {
		a.log.Error("unfencing failed", zap.Error(err))
		return
	}
	writable := a.clock.Now()
	a.log.Info("promoted: mysqld is writable")
	a.labeler.Event(ctx, a.cfg.Name, eventNormal, "Promoted", "became the writable primary")
	a.setRole(ctx, RolePrimary)
	a.recordFailover(ctx, writable)
}

func (a *Agent) recordFailover(ctx context.Context, writable time.Time) {
	f := a.failoverFrom
	a.failoverFrom = nil
	if f == nil {
		return
	}
	routed := a.clock.Now()
	if !f.detected.IsZero() {
		a.metrics.LastFailoverPhase.WithLabelValues("detect").Set(f.acquired.Sub(f.detected).Seconds())
	}
	a.metrics.LastFailoverPhase.WithLabelValues("promote").Set(writable.Sub(f.acquired).Seconds())
	a.metrics.LastFailoverPhase.WithLabelValues("route").Set(routed.Sub(writable).Seconds())
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	err := a.store.AppendHistory(cctx, dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: f.from, To: a.cfg.Name,
		At: writable, Reason: "leader lost"})
	if err != nil {
		a.log.Warn("appending history failed", zap.Error(err))
	}
}

func (a *Agent) isMe(host string, port int) bool {
	return net.JoinHostPort(host, strconv.Itoa(port)) == a.cfg.MySQLAddr
}

type observedPeer struct {
	name string
	db   Database
	obs  mysqlctl.Observation
}

// reachablePeers connects to every other member's mysqld in parallel and
// observes it; members that do not answer within retry_timeout are skipped.
func (a *Agent) reachablePeers(ctx context.Context, cl *dcs.Cluster) []observedPeer {
	var (
		mu  sync.Mutex
		out []observedPeer
		wg  sync.WaitGroup
	)
	for _, m := range cl.Members {
		if m.Name == a.cfg.Name || m.MySQLAddr == "" {
			continue
		}
		db := a.peerConn(ctx, m.MySQLAddr)
		if db == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := a.callCtx(ctx)
			defer cancel()
			o, err := db.Observe(cctx)
			if err != nil {
				a.dropPeer(m.MySQLAddr)
				return
			}
			mu.Lock()
			out = append(out, observedPeer{name: m.Name, db: db, obs: o})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (a *Agent) forEachPeer(peers []observedPeer, f func(name string, p Database, o mysqlctl.Observation)) {
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() { defer wg.Done(); f(p.name, p.db, p.obs) }()
	}
	wg.Wait()
}

// peerConn returns a cached connection to a peer's mysqld.
func (a *Agent) peerConn(ctx context.Context, addr string) Database {
	a.peersMu.Lock()
	db, ok := a.peers[addr]
	a.peersMu.Unlock()
	if ok {
		return db
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	db, err := a.dial(cctx, addr)
	if err != nil {
		a.log.Info("peer mysqld not reachable", zap.String("addr", addr), zap.Error(err))
		return nil
	}
	a.peersMu.Lock()
	a.peers[addr] = db
	a.peersMu.Unlock()
	return db
}

func (a *Agent) dropPeer(addr string) {
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	if db, ok := a.peers[addr]; ok {
		if c, ok := db.(interface{ Close() error }); ok {
			c.Close()
		}
		delete(a.peers, addr)
	}
}

// follow makes us a read-only replica of the lock holder.
func (a *Agent) follow(ctx context.Context, cl *dcs.Cluster, obs mysqlctl.Observation, leader string) {
	a.metrics.IsLeader.Set(0)
	if obs.Status.Writable() || a.hasDeadline() {
		a.fenceSelf(ctx, "self", fmt.Sprintf("%s holds the lock", leader))
	}
	lm, ok := cl.Member(leader)
	if !ok || lm.MySQLAddr == "" {
		a.log.Info("leader has no member record yet; waiting", zap.String("leader", leader))
		a.setRole(ctx, RoleNone)
		return
	}
	host, portStr, _ := net.SplitHostPort(lm.MySQLAddr)
	port, _ := strconv.Atoi(portStr)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	r := obs.Replica
	if r == nil || r.SourceHost != host || r.SourcePort != port || !r.AutoPosition {
		if !a.checkErrant(ctx, lm, obs) {
			return
		}
		err := a.db.ReplicateFrom(cctx, mysqlctl.Source{Host: host, Port: port, User: a.cfg.ReplicationUser,
			Password: a.cfg.ReplicationPassword, ConnectRetry: time.Second, HeartbeatPeriod: a.config.LoopWait})
		if err != nil {
			a.log.Warn("pointing replication at the leader failed", zap.String("leader", leader), zap.Error(err))
			return
		}
		a.log.Info("replicating from the leader", zap.String("leader", leader), zap.String("addr", lm.MySQLAddr))
	} else if (r.IOThread == mysqlctl.ThreadStopped || r.SQLThread == mysqlctl.ThreadStopped) && !r.Broken() {
		// A promoting candidate may have stopped our receiver, then lost.
		if err := a.db.StartReplication(cctx); err != nil {
			a.log.Warn("restarting replication failed", zap.Error(err))
		}
	}
	wantSemi := a.config.SemiSync != dcs.SemiSyncOff
	if obs.Status.SemiSync.SourceEnabled {
		a.db.SetSemiSyncSource(cctx, false, a.semiSyncTimeout(), 1)
	}
	if obs.Status.SemiSync.ReplicaEnabled != wantSemi {
		if err := a.db.SetSemiSyncReplica(cctx, wantSemi); err != nil {
			a.log.Warn("setting replica semi-sync failed", zap.Error(err))
		}
	}
	if r != nil && r.Broken() {
		a.setRole(ctx, RoleNone)
		return
	}
	a.setRole(ctx, RoleReplica)
}

// checkErrant refuses to replicate from a source that lacks transactions we
// have: our executed set is read first, the source's after, and the source
// only grows, so anything of ours it lacks is errant.
func (a *Agent) checkErrant(ctx context.Context, leader dcs.Member, obs mysqlctl.Observation) bool {
	if obs.Status.GTIDExecuted == "" {
		a.errant = ""
		return true
	}
	p := a.peerConn(ctx, leader.MySQLAddr)
	if p == nil {
		return false
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	po, err := p.Observe(cctx)
	if err != nil {
		a.dropPeer(leader.MySQLAddr)
		return false
	}
	errant, err := gtid.Errant(a.flavor(), obs.Status.GTIDExecuted, po.Status.GTIDExecuted)
	if err != nil {
		a.log.Error("comparing GTIDs with the leader failed", zap.Error(err))
		return false
	}
	if errant != "" {
		if a.errant != errant {
			a.log.Error("errant transactions: not replicating from the leader until they are resolved",
				zap.String("errant", errant), zap.String("leader", leader.Name))
			a.labeler.Event(ctx, a.cfg.Name, eventWarning, "Errant", "errant transactions "+errant)
		}
		a.errant = errant
		a.setRole(ctx, RoleNone)
		return false
	}
	a.errant = ""
	return true
}

// handover is a planned switchover to target: stop writes, wait until the
// target has everything, then pass the lock in one compare-and-set.
func (a *Agent) handover(ctx context.Context, cl *dcs.Cluster, target, reason string) {
	tm, ok := cl.Member(target)
	if !ok || tm.MySQLAddr == "" {
		return
	}
	peer := a.peerConn(ctx, tm.MySQLAddr)
	if peer == nil {
		return
	}
	if !a.renew(ctx) {
		return
	}
	start := a.clock.Now()
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.db.Fence(cctx); err != nil {
		a.log.Error("switchover: fencing ourselves failed", zap.Error(err))
		return
	}
	a.db.KillClients(cctx)
	obs, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Error("switchover: observing ourselves failed", zap.Error(err))
		return
	}
	// Leave room before the deadline for the hand-over write itself.
	wait := a.currentDeadline().Sub(a.clock.Now()) - 2*a.config.RetryTimeout
	if wait <= 0 {
		return
	}
	wctx, wcancel := context.WithTimeout(ctx, wait+a.config.RetryTimeout)
	defer wcancel()
	if err := peer.WaitForGTID(wctx, obs.Status.GTIDExecuted, wait); err != nil {
		// Give up rather than retry: every retry would stop writes again.
		a.rejectSwitchover(ctx, cl, fmt.Sprintf("target %s did not catch up within %s: %v", target, wait.Round(time.Millisecond), err))
		return
	}
	hctx, hcancel := a.callCtx(ctx)
	defer hcancel()
	if err := a.store.HandoverLeader(hctx, target); err != nil {
		a.log.Error("switchover: handing the lock over failed", zap.Error(err))
		return
	}
	stopped := a.clock.Since(start)
	a.setDeadline(time.Time{})
	a.metrics.IsLeader.Set(0)
	a.metrics.Switchovers.Inc()
	a.log.Info("handed the lock over", zap.String("target", target), zap.Duration("writes_stopped_for", stopped))
	// Relabelled after the hand-over, not inside the write stop: the target
	// drops our primary label itself before it unfences.
	a.setRole(ctx, RoleNone)
	a.labeler.Event(ctx, a.cfg.Name, eventNormal, "Switchover", fmt.Sprintf("handed over to %s: %s", target, reason))
	if sw := cl.Switchover; sw != nil {
		a.store.ClearSwitchover(hctx, sw.Version)
	}
	if err := a.store.AppendHistory(hctx, dcs.HistoryEntry{Kind: dcs.HistorySwitchover, From: a.cfg.Name, To: target,
		At: a.clock.Now(), Reason: reason, WriteUnavailable: stopped}); err != nil {
		a.log.Warn("appending history failed", zap.Error(err))
	}
}

func (a *Agent) clearRequest(ctx context.Context, cl *dcs.Cluster, reason string) {
	if cl.Switchover == nil {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ClearSwitchover(cctx, cl.Switchover.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the fulfilled request failed", zap.Error(err))
		return
	}
	a.log.Info("cleared the pending request", zap.String("reason", reason))
}

func (a *Agent) rejectSwitchover(ctx context.Context, cl *dcs.Cluster, reason string) {
	a.log.Warn("rejecting switchover request", zap.String("reason", reason))
	a.labeler.Event(ctx, a.cfg.Name, eventWarning, "SwitchoverRejected", reason)
	if cl.Switchover == nil {
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.ClearSwitchover(cctx, cl.Switchover.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the switchover request failed", zap.Error(err))
	}
	// Keep leading as before.
	if obs, err := a.db.Observe(cctx); err == nil {
		a.lead(ctx, cl, obs, false)
	}
}
