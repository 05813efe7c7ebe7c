package agent

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// promote carries out one step of the promotion that failover.Decide chose
// (the promotion protocol), while act's renewal of the lock, when due, is in
// flight: held waits for it, and reports whether we hold the lock.
// Each step is idempotent and derived from what was observed this
// iteration, so a crash at any line is repaired by the next attempt.
//
// When the action names receivers to stop or members to fence, it waits
// for the renewal (a member we would fence may hold the lock now), then
// only prepares, on the peers' mysqld, each step on all the named peers in
// parallel under one retry_timeout:
//
// 1. Stop the receiver of every peer still pulling from another source, so
// an old semi-sync source can collect no more acknowledgements:
//
//	MySQL:   STOP REPLICA IO_THREAD
//	MariaDB: STOP SLAVE IO_THREAD
//
// 2. Fence every other member that answered writable (an old source), then
// kill its client sessions, with the statements of fenceSelf's steps 1 and 2
// (for a peer both share one retry_timeout):
//
//	MySQL:   SET GLOBAL super_read_only = ON; KILL CONNECTION id ...
//	MariaDB: SET GLOBAL read_only = ON; KILL HARD CONNECTION id ...
//
// Both steps always run. If either fails on any peer, the promotion stops
// there: we keep the lock, stay read-only, and retry at the next iteration.
// Otherwise the loop decides again at once (redo), on fresh observations.
//
// Otherwise, with action.Unfence, it promotes our mysqld, steps 4 to 8
// under one retry_timeout, stopping at the first step that fails (we stay
// read-only, holding the lock, and the next iteration resumes). Steps 3 to
// 7 change only our own mysqld, and need no deadline:
//
// 3. Log and record an UnverifiedFence Event naming the members that could
// not be reached, if any.
//
// 4. When our old source answered this iteration, fenced, its history is
// final: take all of it before cutting the stream. Restart our replication
// if an earlier attempt stopped it (and it is not broken), then wait up to
// retry_timeout/2 for its executed set:
//
//	MySQL:   START REPLICA
//	         SELECT WAIT_FOR_EXECUTED_GTID_SET(set, seconds)
//	MariaDB: START SLAVE
//	         SELECT MASTER_GTID_WAIT(pos, seconds)
//
// 5. Stop our receiver, observe, and wait up to retry_timeout/2 until the
// whole relay log (the retrieved set) is applied; a long apply spans
// iterations, the lock renewed meanwhile:
//
//	MySQL:   STOP REPLICA IO_THREAD
//	MariaDB: STOP SLAVE IO_THREAD
//	both:    SHOW GLOBAL VARIABLES WHERE Variable_name IN (...)
//	         SHOW GLOBAL STATUS WHERE Variable_name IN (...)
//	         SHOW REPLICA STATUS
//	MySQL:   SELECT WAIT_FOR_EXECUTED_GTID_SET(retrieved, seconds)   -- if anything was retrieved
//	MariaDB: SELECT MASTER_GTID_WAIT(retrieved, seconds)
//
// 6. Forget the source:
//
//	MySQL:   STOP REPLICA; RESET REPLICA ALL
//	MariaDB: STOP SLAVE; RESET SLAVE ALL
//
// 7. Switch replica-side semi-sync off if it is on (a failure is only
// logged), then, unless semi_sync is off, source-side semi-sync on, waiting
// for one replica (MySQL loads the plugin first if it is not loaded:
// INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'):
//
//	MySQL:   SET GLOBAL rpl_semi_sync_replica_enabled = OFF
//	         SET GLOBAL rpl_semi_sync_source_timeout = ms
//	         SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 1
//	         SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'
//	         SET GLOBAL rpl_semi_sync_source_enabled = ON
//	MariaDB: SET GLOBAL rpl_semi_sync_slave_enabled = OFF
//	         SET GLOBAL rpl_semi_sync_master_timeout = ms
//	         SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'
//	         SET GLOBAL rpl_semi_sync_master_enabled = ON
//
// 8. Wait for the renewal; only if we hold the lock, and if the deadline
// leaves a retry_timeout, arm the dead-man switch to fire at the fence
// trigger (deadman.go; within a retry_timeout of its own; a failure stops
// the promotion here, with a DeadmanFailed Event), then become writable:
//
//	SELECT @@global.event_scheduler
//	SET SESSION sql_log_bin = 0, time_zone = '+00:00'
//	ALTER EVENT mysqlha.deadman ON SCHEDULE AT CURRENT_TIMESTAMP(6) + INTERVAL us MICROSECOND ...
//	  (or, the first time, CREATE DATABASE IF NOT EXISTS mysqlha; CREATE EVENT ...)
//	SET SESSION sql_log_bin = 1, time_zone = DEFAULT
//	MySQL:   SET GLOBAL super_read_only = OFF; SET GLOBAL read_only = OFF
//	MariaDB: SET GLOBAL read_only = OFF
//
// 9. Drop the primary label of every other member, record a Promoted Event,
// route the primary Service to our pod (--primary-service) and label it
// primary; when we took the lock from a lost leader, set the failover phase
// metrics and append a failover history entry.
func (a *Agent) promote(ctx context.Context, action failover.Action, o observed, held func() bool) (redo bool) {
	if len(action.StopReceivers) > 0 || len(action.Fence) > 0 {
		if !held() {
			return false // a member we would fence may be the holder now
		}
		stopped := a.onPeers(ctx, action.StopReceivers, o.peers, func(cctx context.Context, name string, p Database) error {
			if err := p.StopReplicationIO(cctx); err != nil {
				a.log.Warn("stopping a replica's receiver failed", zap.String("peer", name), zap.Error(err))
				return err
			}
			a.metrics.fenced(fenceKindReplicaReceiver)
			return nil
		})
		fenced := a.fenceOthers(ctx, action.Fence, o.peers, fenceKindRemoteSource)
		if !stopped || !fenced {
			a.log.Error("promotion stopped: a reachable member could not be stopped or fenced; keeping the lock read-only and retrying",
				zap.Strings("fence", action.Fence), zap.Strings("stop_receivers", action.StopReceivers))
			return false
		}
		return true
	}
	if action.CatchUpFrom != "" {
		a.catchUp(ctx, action.CatchUpFrom, action.CatchUpTo, o)
		return false
	}
	if !action.Unfence {
		return false
	}
	if len(action.Unverified) > 0 {
		msg := "promoting although " + strings.Join(action.Unverified, ", ") +
			" could not be reached to verify it is read-only: its own agent fences it at its lock deadline"
		a.log.Warn("promoting with unverified members", zap.Strings("unverified", action.Unverified))
		a.labeler.Event(ctx, a.self.Name, eventWarning, "UnverifiedFence", msg)
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if set := a.fencedSourceExecuted(o); set != "" {
		// Our old source still answers, fenced: its history is final, so
		// take all of it before cutting the stream, and lose nothing it
		// acknowledged. Our receiver may have been stopped by an earlier
		// attempt: pulling from a fenced source is safe.
		if r := o.obs.Replica; r.IOThread == mysqlctl.ThreadStopped && !r.Broken() {
			if err := a.db.StartReplication(cctx); err != nil {
				a.log.Warn("restarting our receiver to catch up with the fenced old source failed", zap.Error(err))
				return false
			}
		}
		if err := a.db.WaitForGTID(cctx, set, a.clusterConfig.RetryTimeout/2); err != nil {
			a.log.Info("not all of the fenced old source's transactions received yet; promotion continues next iteration", zap.Error(err))
			return false
		}
	}
	if err := a.db.StopReplicationIO(cctx); err != nil {
		a.log.Warn("stopping our receiver failed", zap.Error(err))
		return false
	}
	obs, err := a.db.Observe(cctx)
	if err != nil {
		a.log.Warn("observing before promotion failed", zap.Error(err))
		return false
	}
	if r := obs.Replica; r != nil && r.RetrievedGTID != "" {
		if err := a.db.WaitForGTID(cctx, r.RetrievedGTID, a.clusterConfig.RetryTimeout/2); err != nil {
			a.log.Info("relay log not applied yet; promotion continues next iteration", zap.Error(err))
			return false
		}
	}
	if err := a.db.ResetReplication(cctx); err != nil {
		a.log.Warn("resetting replication failed", zap.Error(err))
		return false
	}
	if err := a.db.SetSemiSyncReplica(cctx, false); err != nil {
		a.log.Warn("switching replica semi-sync off failed", zap.Error(err))
	}
	if a.clusterConfig.SemiSync != dcs.SemiSyncOff {
		if err := a.db.SetSemiSyncSource(cctx, true, a.semiSyncTimeout(), 1); err != nil {
			a.log.Warn("switching source semi-sync on failed", zap.Error(err))
			return false
		}
	}
	if !held() {
		a.log.Warn("not unfencing: the lock's renewal failed")
		return false
	}
	if !a.canWriteFor(a.clusterConfig.RetryTimeout) {
		a.log.Warn("not unfencing: too close to the lock deadline")
		return false
	}
	if err := a.armDeadman(ctx, a.db); err != nil {
		a.log.Error("not unfencing: the dead-man switch could not be armed, so nothing would fence mysqld if this agent died", zap.Error(err))
		a.labeler.Event(ctx, a.self.Name, eventWarning, "DeadmanFailed", "not unfencing: "+err.Error())
		return false
	}
	a.deadmanArmed.Store(true)
	if err := a.db.Unfence(cctx); err != nil {
		a.log.Error("unfencing failed", zap.Error(err))
		return false
	}
	writable := a.clock.Now()
	a.acknowledgers = nil // a new term: nobody has acknowledged our writes yet
	a.log.Info("promoted: mysqld is writable")
	// The labels wait until we are writable: every other member is
	// read-only by now, so the old primary's label routes nothing that
	// could write, and dropping it first would hold our unfence behind a
	// round trip to the API server. Dropped before ours is set, so that a
	// Service selecting the label never holds two.
	a.dropOtherPrimaryLabels(ctx, o.cl)
	a.labeler.Event(ctx, a.self.Name, eventNormal, "Promoted", "became the writable primary")
	a.setRole(ctx, dcs.RolePrimary)
	a.recordFailover(ctx, writable)
	return false
}

// catchUp takes the transactions that member, reachable and fenced but
// maybe not fit to lead, holds and we lack (failover's data before
// eligibility): it replicates from it until we hold upTo, then the next
// iteration decides again. Repointing discards our relay log, so that is
// applied first; each step is idempotent and resumes at the next attempt:
//
//	MySQL:   STOP REPLICA IO_THREAD
//	         SELECT WAIT_FOR_EXECUTED_GTID_SET(retrieved, seconds)
//	         (then follow's repoint statements, with member as the source)
//	         SELECT WAIT_FOR_EXECUTED_GTID_SET(upTo, seconds)
//	MariaDB: STOP SLAVE IO_THREAD
//	         SELECT MASTER_GTID_WAIT(retrieved, seconds)
//	         (then follow's repoint statements, with member as the source)
//	         SELECT MASTER_GTID_WAIT(upTo, seconds)
//
// Each wait is bounded by retry_timeout/2.
func (a *Agent) catchUp(ctx context.Context, member, upTo string, o observed) {
	m, ok := o.cl.Member(member)
	if !ok || m.MySQLAddr == "" {
		a.log.Warn("cannot catch up from a member without an address", zap.String("peer", member))
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if r := o.obs.Replica; !replicatesFrom(r, m.MySQLAddr) {
		if r != nil && r.RetrievedGTID != "" {
			if err := a.db.StopReplicationIO(cctx); err != nil {
				a.log.Warn("stopping our receiver before catching up failed", zap.Error(err))
				return
			}
			if err := a.db.WaitForGTID(cctx, r.RetrievedGTID, a.clusterConfig.RetryTimeout/2); err != nil {
				a.log.Info("relay log not applied yet; catching up continues next iteration", zap.Error(err))
				return
			}
		}
		if err := a.db.ReplicateFrom(cctx, a.replicationSource(m.MySQLAddr)); err != nil {
			a.log.Warn("replicating from a member that holds transactions we lack failed", zap.String("peer", member), zap.Error(err))
			return
		}
		a.log.Info("taking transactions we lack from a member before unfencing", zap.String("peer", member), zap.String("up_to", upTo))
		a.labeler.Event(ctx, a.self.Name, eventNormal, "CatchingUp",
			"taking transactions we lack from "+member+" before becoming writable")
	} else if (r.IOThread == mysqlctl.ThreadStopped || r.SQLThread == mysqlctl.ThreadStopped) && !r.Broken() {
		if err := a.db.StartReplication(cctx); err != nil {
			a.log.Warn("restarting replication to catch up failed", zap.String("peer", member), zap.Error(err))
			return
		}
	}
	if err := a.db.WaitForGTID(cctx, upTo, a.clusterConfig.RetryTimeout/2); err != nil {
		a.log.Info("not all of the member's transactions received yet; promotion continues next iteration",
			zap.String("peer", member), zap.Error(err))
	}
}

// fencedSourceExecuted is the executed GTID set of the member our mysqld
// replicates from, when that member answered this iteration, read-only;
// "" otherwise.
func (a *Agent) fencedSourceExecuted(o observed) string {
	src := o.obs.Replica
	if src == nil {
		return ""
	}
	addr := net.JoinHostPort(src.SourceHost, strconv.Itoa(src.SourcePort))
	for _, m := range o.cl.Members {
		if p, ok := o.peers[m.Name]; ok && m.MySQLAddr == addr && p.reachable && !p.obs.Status.Writable() {
			return p.obs.Status.GTIDExecuted
		}
	}
	return ""
}

// dropOtherPrimaryLabels removes the primary label of every other member,
// in parallel.
func (a *Agent) dropOtherPrimaryLabels(ctx context.Context, cl *dcs.Cluster) {
	var wg sync.WaitGroup
	for _, m := range cl.Members {
		if m.Name == a.self.Name {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := a.callCtx(ctx)
			defer cancel()
			if err := a.labeler.RemovePrimary(cctx, m.Name); err != nil {
				a.log.Warn("removing an old primary label failed", zap.String("peer", m.Name), zap.Error(err))
			}
		}()
	}
	wg.Wait()
}

func (a *Agent) recordFailover(ctx context.Context, writable time.Time) {
	f := a.failoverFrom
	a.failoverFrom = nil
	if f == nil {
		return
	}
	routed := a.clock.Now()
	a.metrics.setFailoverPhase(phaseDetect, f.acquired.Sub(f.detected), !f.detected.IsZero())
	a.metrics.setFailoverPhase(phasePromote, writable.Sub(f.acquired), true)
	a.metrics.setFailoverPhase(phaseRoute, routed.Sub(writable), true)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	err := a.store.AppendHistory(cctx, dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: f.from, To: a.self.Name,
		At: writable, Reason: f.historyReason()})
	if err != nil {
		a.log.Warn("appending history failed", zap.Error(err))
	}
}

// steadyPrimary keeps a running primary's settings right:
//
//	MySQL:   SET GLOBAL rpl_semi_sync_source_enabled = ON|OFF (and its timeout, wait point AFTER_SYNC)
//	MariaDB: SET GLOBAL rpl_semi_sync_master_enabled = ON|OFF (and its timeout, wait point AFTER_SYNC)
func (a *Agent) steadyPrimary(ctx context.Context, obs mysqlctl.Observation) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	want, ss := a.clusterConfig.SemiSync != dcs.SemiSyncOff, obs.Status.SemiSync
	if ss.SourceEnabled != want || (want && (ss.SourceTimeout != a.semiSyncTimeout() || ss.WaitPoint != mysqlctl.WaitPointAfterSync)) {
		if err := a.db.SetSemiSyncSource(cctx, want, a.semiSyncTimeout(), 1); err != nil {
			a.log.Warn("setting source semi-sync failed", zap.Error(err))
		}
	}
	a.setRole(ctx, dcs.RolePrimary)
}

// trackAcknowledgers updates, in lossless mode, the list of members that
// may hold an acknowledged write of ours, from this iteration's probes of
// the peers (failover.TrackAcknowledgers); publishMember writes it on our
// record. A peer that was not probed counts as not streaming.
func (a *Agent) trackAcknowledgers(o observed) {
	if a.clusterConfig.SemiSync != dcs.SemiSyncStrict || o.cl == nil {
		a.acknowledgers = nil
		return
	}
	var peers []failover.AckPeer
	for _, m := range o.cl.Members {
		if m.Name == a.self.Name {
			continue
		}
		p := failover.AckPeer{Name: m.Name, Live: !m.Stale}
		if pr, ok := o.peers[m.Name]; ok && pr.reachable {
			p.Streaming = pullingFrom(pr.obs) == a.self.MySQLAddr && pr.obs.Status.SemiSync.ReplicaEnabled
			p.Executed = pr.obs.Status.GTIDExecuted
			if r := pr.obs.Replica; r != nil {
				p.Retrieved = r.RetrievedGTID
			}
		}
		peers = append(peers, p)
	}
	a.acknowledgers = failover.TrackAcknowledgers(a.flavor(), a.acknowledgers, peers, o.obs.Status.GTIDExecuted,
		o.obs.Status.SemiSync.SourceClients)
}

func (a *Agent) semiSyncTimeout() time.Duration {
	if a.clusterConfig.SemiSync == dcs.SemiSyncStrict {
		// Effectively never fall back to asynchronous.
		return 365 * 24 * time.Hour
	}
	if a.self.SemiSyncTimeout > 0 {
		return a.self.SemiSyncTimeout
	}
	return 10 * time.Second
}
