package agent

import (
	"context"
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// follow makes us a read-only replica of the lock holder, leader. Our mysqld
// is already read-only: failover.Decide fences a writable member that does
// not hold the lock before it ever follows. Every iteration, stopping at the
// first step that fails:
//
// 1. Find the leader's member record; without one (or without its MySQL
// address) drop our pod's role label and wait.
//
// 2. Check that we have no transaction the leader lacks (checkErrant):
// unless our executed set is empty, observe the leader's mysqld; while it
// is still read-only (promoting) give no verdict and wait; otherwise compare
// our executed set with its (on MariaDB also the gtid_binlog_state of
// both). Errant transactions stop us here, with no role label and an
// Errant Event when the errant set changed:
//
//	SHOW GLOBAL VARIABLES WHERE Variable_name IN (...)   -- on the leader
//	SHOW GLOBAL STATUS WHERE Variable_name IN (...)
//	SHOW REPLICA STATUS
//
// 3a. Repoint, when our source is not the leader's address or not
// GTID-positioned; the MariaDB alignment runs only when gtid_binlog_pos is
// non-empty and differs from gtid_slave_pos (read with SHOW GLOBAL
// VARIABLES first):
//
//	MySQL:   STOP REPLICA
//	         CHANGE REPLICATION SOURCE TO SOURCE_HOST = ?, SOURCE_PORT = ?, SOURCE_USER = ?,
//	           SOURCE_PASSWORD = ?, SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 1,
//	           SOURCE_RETRY_COUNT = 86400, SOURCE_HEARTBEAT_PERIOD = loop_wait, GET_SOURCE_PUBLIC_KEY = 1
//	         START REPLICA
//	MariaDB: STOP SLAVE
//	         SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos
//	         CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?,
//	           MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1, MASTER_HEARTBEAT_PERIOD = loop_wait
//	         START SLAVE
//
// With --replication-tls the CHANGE statement also sets MASTER_SSL = 1 and
// the CA, certificate and key (SOURCE_SSL... on MySQL), and, with a CA,
// MASTER_SSL_VERIFY_SERVER_CERT = 1.
//
// 3b. Or, when already pointed at the leader but a thread is stopped without
// an error (most likely by a candidate promoting itself), restart
// replication once it has stayed stopped for a loop_wait (a failure is
// logged):
//
//	MySQL:   START REPLICA
//	MariaDB: START SLAVE
//
// 4. Switch source-side semi-sync off if it is on (a failure is ignored):
//
//	MySQL:   SET GLOBAL rpl_semi_sync_source_timeout = ms
//	         SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 1
//	         SET GLOBAL rpl_semi_sync_source_enabled = OFF
//	MariaDB: SET GLOBAL rpl_semi_sync_master_timeout = ms
//	         SET GLOBAL rpl_semi_sync_master_enabled = OFF
//
// 5. Switch replica-side semi-sync on (off when semi_sync is off) when it
// differs, restarting a running receiver so that it takes effect (MySQL
// loads the plugin first when switching on: INSTALL PLUGIN
// rpl_semi_sync_replica SONAME 'semisync_replica.so'); a failure is logged:
//
//	MySQL:   SET GLOBAL rpl_semi_sync_replica_enabled = ON|OFF
//	         STOP REPLICA IO_THREAD; START REPLICA IO_THREAD
//	MariaDB: SET GLOBAL rpl_semi_sync_slave_enabled = ON|OFF
//	         STOP SLAVE IO_THREAD; START SLAVE IO_THREAD
//
// 6. Label our pod replica, or drop its role label while our replication is
// broken (as observed at the start of this iteration).
//
// A member that stops at step 2 with errant transactions, or at step 6
// with a source that purged the binary logs it needs, heals (heal.go):
// saves what only it holds, then asks for its own rebuild.
func (a *Agent) follow(ctx context.Context, cl *dcs.Cluster, obs mysqlctl.Observation, leader string) {
	a.metrics.IsLeader.Set(0)
	lm, ok := cl.Member(leader)
	if !ok || lm.MySQLAddr == "" {
		a.log.Info("leader has no member record yet; waiting", zap.String("leader", leader))
		a.setRole(ctx, dcs.RoleUnknown)
		return
	}
	a.noteReceiver(obs.Replica)
	if !a.checkErrant(ctx, lm, obs) {
		if a.errant != "" {
			a.heal(ctx, cl, leader)
		}
		return
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	r := obs.Replica
	if !replicatesFrom(r, lm.MySQLAddr) {
		if err := a.db.ReplicateFrom(cctx, a.replicationSource(lm.MySQLAddr)); err != nil {
			a.log.Warn("pointing replication at the leader failed", zap.String("leader", leader), zap.Error(err))
			return
		}
		a.log.Info("replicating from the leader", zap.String("leader", leader), zap.String("addr", lm.MySQLAddr))
	} else if (r.IOThread == mysqlctl.ThreadStopped || r.SQLThread == mysqlctl.ThreadStopped) && !r.Broken() {
		// Stopped by a candidate promoting itself, most likely: then our
		// view of the lock is the stale one, and restarting would let an
		// old semi-sync source collect acknowledgements again. Restart only
		// once it has stayed stopped for a loop_wait, by when the DCS watch
		// has shown us any newer holder.
		if a.receiverStoppedSince.IsZero() {
			a.receiverStoppedSince = a.clock.Now()
		}
		if a.clock.Since(a.receiverStoppedSince) >= a.clusterConfig.LoopWait {
			if err := a.db.StartReplication(cctx); err != nil {
				a.log.Warn("restarting replication failed", zap.Error(err))
			}
			a.receiverStoppedSince = time.Time{}
		}
	} else {
		a.receiverStoppedSince = time.Time{}
	}
	wantSemi := a.clusterConfig.SemiSync != dcs.SemiSyncOff
	if obs.Status.SemiSync.SourceEnabled {
		a.db.SetSemiSyncSource(cctx, false, a.semiSyncTimeout(), 1)
	}
	if obs.Status.SemiSync.ReplicaEnabled != wantSemi {
		if err := a.db.SetSemiSyncReplica(cctx, wantSemi); err != nil {
			a.log.Warn("setting replica semi-sync failed", zap.Error(err))
		}
	}
	if r != nil && r.Broken() {
		a.heal(ctx, cl, leader)
		a.setRole(ctx, dcs.RoleUnknown)
		return
	}
	a.setRole(ctx, dcs.RoleReplica)
}

// replicatesFrom reports whether r is GTID-positioned replication from addr.
func replicatesFrom(r *mysqlctl.ReplicaStatus, addr string) bool {
	return r != nil && r.AutoPosition && net.JoinHostPort(r.SourceHost, strconv.Itoa(r.SourcePort)) == addr
}

// replicationSource is how our mysqld replicates from the member at addr.
func (a *Agent) replicationSource(addr string) mysqlctl.Source {
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	return mysqlctl.Source{Host: host, Port: port, User: a.self.ReplicationUser, Password: a.self.ReplicationPassword,
		ConnectRetry: time.Second, HeartbeatPeriod: a.clusterConfig.LoopWait, TLS: a.self.ReplicationTLS}
}

// checkErrant refuses to replicate from a source that lacks transactions we
// have: our executed set was read first, the source's now, and a writable
// source only grows, so anything of ours it lacks is errant. A holder still
// read-only is promoting, and its history is not final: no verdict yet. It runs at every
// observation, since a transaction can be written to a replica by a user
// with the privilege to bypass read-only at any time.
//
// A member that executed nothing has nothing errant, but one that received
// transactions it has not applied waits too: repointing (CHANGE MASTER)
// drops its relay log, which may hold the only copy of an acknowledged
// write the promoting holder must fetch or wait for.
func (a *Agent) checkErrant(ctx context.Context, leader dcs.Member, obs mysqlctl.Observation) bool {
	if obs.Status.GTIDExecuted == "" && (obs.Replica == nil || obs.Replica.RetrievedGTID == "") {
		a.errant = ""
		return true
	}
	p, err := a.peerConn(ctx, leader.MySQLAddr)
	if err != nil {
		return false
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	po, err := p.Observe(cctx)
	if err != nil {
		a.dropPeer(leader.MySQLAddr)
		return false
	}
	if !po.Status.Writable() {
		// The holder has not promoted yet: its history is not final (it
		// catches up first, or stands down for a member ahead of it, maybe
		// us), so what we have and it lacks is not errant yet. Wait.
		if a.awaitedHolder != leader.Name {
			a.awaitedHolder = leader.Name // said once per wait, not every loop
			a.log.Info("the lock holder is still read-only; waiting before comparing histories", zap.String("leader", leader.Name))
		}
		return false
	}
	a.awaitedHolder = ""
	errant, err := gtid.Errant(a.flavor(), obs.Status.GTIDExecuted, po.Status.GTIDExecuted)
	if err == nil && errant == "" && obs.Status.GTIDBinlogState != "" && po.Status.GTIDBinlogState != "" {
		// MariaDB: the position keeps one GTID per domain, so a write of
		// our own at a lower seq_no than the leader's looks merely behind;
		// the binlog state, one GTID per server, shows the fork.
		errant, err = gtid.ErrantMariaDBState(obs.Status.GTIDBinlogState, po.Status.GTIDBinlogState)
	}
	if err != nil {
		a.log.Error("comparing GTIDs with the leader failed", zap.Error(err))
		return false
	}
	if errant != "" {
		if a.errant != errant {
			a.log.Error("errant transactions: not replicating from the leader until they are resolved",
				zap.String("errant", errant), zap.String("leader", leader.Name))
			a.labeler.Event(ctx, a.self.Name, eventWarning, "Errant", "errant transactions "+errant)
		}
		a.errant, a.healing.leaderState = errant, po.Status.GTIDBinlogState
		a.setRole(ctx, dcs.RoleUnknown)
		return false
	}
	a.errant = ""
	return true
}
