package mysqlctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Statement is one SQL statement and the arguments for its placeholders. The
// driver interpolates the arguments client-side (interpolateParams=true), so
// statements that cannot be prepared (CHANGE MASTER, SET GLOBAL) take them too.
type Statement struct {
	SQL  string
	Args []any
}

func stmt(sql string, args ...any) Statement { return Statement{SQL: sql, Args: args} }

// Dialect produces the SQL of every operation for one flavor and release. It
// is pure: no I/O, so each statement is unit-tested exactly.
type Dialect struct {
	Server ServerInfo
}

func (d Dialect) mariaDB() bool { return d.Server.Flavor == gtid.MariaDB }

// Fence makes the server refuse writes from ordinary clients. On MySQL,
// super_read_only also refuses users with SUPER/CONNECTION_ADMIN; MariaDB has
// no such switch, so its application users must not hold READ_ONLY ADMIN.
func (d Dialect) Fence() []Statement {
	if d.mariaDB() {
		return []Statement{stmt("SET GLOBAL read_only = ON")}
	}
	return []Statement{stmt("SET GLOBAL super_read_only = ON")}
}

// Unfence makes the server writable. On MySQL both switches are cleared
// explicitly, so the result does not depend on their coupling rules.
func (d Dialect) Unfence() []Statement {
	if d.mariaDB() {
		return []Statement{stmt("SET GLOBAL read_only = OFF")}
	}
	return []Statement{stmt("SET GLOBAL super_read_only = OFF"), stmt("SET GLOBAL read_only = OFF")}
}

// FenceState reads the switches Fence sets, one column each; the server is
// fenced when every column is 1. On MySQL read_only alone is no fence: users
// with SUPER or CONNECTION_ADMIN still write.
func (d Dialect) FenceState() Statement {
	if d.mariaDB() {
		return stmt("SELECT @@global.read_only")
	}
	return stmt("SELECT @@global.read_only, @@global.super_read_only")
}

// SessionLockWaitTimeout bounds how long SET GLOBAL read_only may wait for
// the global read lock while statements are writing. One second is the
// minimum MySQL accepts.
func (d Dialect) SessionLockWaitTimeout(seconds int) Statement {
	return stmt(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", max(seconds, 1)))
}

// SemiSyncWaitSessions counts the commits waiting for a replica's
// acknowledgement. It returns no row when the semi-sync plugin is not loaded.
func (d Dialect) SemiSyncWaitSessions() Statement {
	if d.mariaDB() {
		return stmt("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'")
	}
	return stmt("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_wait_sessions'")
}

// DisableSemiSyncSource switches source-side semi-sync off, which also
// releases every commit waiting for an acknowledgement: on MySQL nothing
// else but the acknowledgement or the timeout does, not even KILL.
func (d Dialect) DisableSemiSyncSource() Statement {
	if d.mariaDB() {
		return stmt("SET GLOBAL rpl_semi_sync_master_enabled = OFF")
	}
	return stmt("SET GLOBAL rpl_semi_sync_source_enabled = OFF")
}

// KillConnection ends a client session. MariaDB's HARD kills even a session
// that is busy in a statement that checks the kill flag rarely.
func (d Dialect) KillConnection(id uint64) Statement {
	if d.mariaDB() {
		return stmt(fmt.Sprintf("KILL HARD CONNECTION %d", id))
	}
	return stmt(fmt.Sprintf("KILL CONNECTION %d", id))
}

// ListConnections reads every session but the caller's own.
func (d Dialect) ListConnections() Statement {
	return stmt("SELECT ID, USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()")
}

func (d Dialect) replicaWord() string {
	if d.mariaDB() {
		return "SLAVE"
	}
	return "REPLICA"
}

// StopReplica stops both replication threads.
func (d Dialect) StopReplica() Statement { return stmt("STOP " + d.replicaWord()) }

// StopReplicaIOThread stops only the receiver: the server keeps applying its
// relay log but accepts (and acknowledges) nothing more from its source.
func (d Dialect) StopReplicaIOThread() Statement {
	return stmt("STOP " + d.replicaWord() + " IO_THREAD")
}

// StartReplica starts both replication threads.
func (d Dialect) StartReplica() Statement { return stmt("START " + d.replicaWord()) }

// StartReplicaIOThread starts the receiver only.
func (d Dialect) StartReplicaIOThread() Statement {
	return stmt("START " + d.replicaWord() + " IO_THREAD")
}

// ResetReplicaAll forgets the source and the relay logs (replication must be
// stopped first).
func (d Dialect) ResetReplicaAll() Statement { return stmt("RESET " + d.replicaWord() + " ALL") }

// ShowReplicaStatus reads replication state. MariaDB accepts the REPLICA
// spelling since 10.5 but keeps the old column names (see parseReplicaStatus).
func (d Dialect) ShowReplicaStatus() Statement { return stmt("SHOW REPLICA STATUS") }

// ResetBinaryLogs discards the binary logs and the GTID history; used only to
// re-seed a member that is rebuilt from scratch. MySQL 8.2 renamed RESET MASTER.
func (d Dialect) ResetBinaryLogs() Statement {
	if !d.mariaDB() && d.Server.Version.AtLeast(8, 2, 0) {
		return stmt("RESET BINARY LOGS AND GTIDS")
	}
	return stmt("RESET MASTER")
}

// Source is where a replica pulls from.
type Source struct {
	Host     string
	Port     int
	User     string
	Password string
	// ConnectRetry is the pause between reconnect attempts of the IO thread.
	ConnectRetry time.Duration
	// HeartbeatPeriod makes an idle source send heartbeats, so a dead source is
	// noticed within about this long.
	HeartbeatPeriod time.Duration
	// TLS, when set, makes the receiver connect over TLS.
	TLS *SourceTLS
}

// SourceTLS are the files of a replica's TLS connection to its source, as
// paths on the replica's server (it opens them, not the agent). With CA,
// the source's certificate is verified, its host name included.
type SourceTLS struct {
	CA, Cert, Key string
}

// Validate rejects a source the server would refuse, before any statement runs.
func (s Source) Validate() error {
	switch {
	case s.Host == "":
		return fmt.Errorf("%w: replication source host is empty", ErrInvalidConfig)
	case s.Port <= 0 || s.Port > 65535:
		return fmt.Errorf("%w: replication source port %d is outside 1-65535", ErrInvalidConfig, s.Port)
	case s.User == "":
		return fmt.Errorf("%w: replication user is empty", ErrInvalidConfig)
	}
	return nil
}

func wholeSeconds(d time.Duration, fallback int) int {
	if d <= 0 {
		return fallback
	}
	return max(int(d.Round(time.Second)/time.Second), 1)
}

// ChangeSource points the replica at src with GTID auto-positioning, so it
// resumes exactly after the last transaction it executed, whatever the source.
func (d Dialect) ChangeSource(src Source) Statement {
	retry := wholeSeconds(src.ConnectRetry, 1)
	heartbeat := src.HeartbeatPeriod.Seconds()
	if heartbeat <= 0 {
		heartbeat = 1
	}
	var s Statement
	if d.mariaDB() {
		s = stmt("CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, "+
			"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = ?, MASTER_HEARTBEAT_PERIOD = ?",
			src.Host, src.Port, src.User, src.Password, retry, heartbeat)
	} else {
		// GET_SOURCE_PUBLIC_KEY lets caching_sha2_password work without TLS.
		s = stmt("CHANGE REPLICATION SOURCE TO SOURCE_HOST = ?, SOURCE_PORT = ?, SOURCE_USER = ?, SOURCE_PASSWORD = ?, "+
			"SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = ?, SOURCE_RETRY_COUNT = 86400, SOURCE_HEARTBEAT_PERIOD = ?, "+
			"GET_SOURCE_PUBLIC_KEY = 1",
			src.Host, src.Port, src.User, src.Password, retry, heartbeat)
	}
	if t := src.TLS; t != nil {
		p := "SOURCE_"
		if d.mariaDB() {
			p = "MASTER_"
		}
		s.SQL += fmt.Sprintf(", %sSSL = 1, %sSSL_CA = ?, %sSSL_CERT = ?, %sSSL_KEY = ?", p, p, p, p)
		s.Args = append(s.Args, t.CA, t.Cert, t.Key)
		if t.CA != "" {
			s.SQL += ", " + p + "SSL_VERIFY_SERVER_CERT = 1"
		}
	}
	return s
}

// AlignReplicaPosition makes MariaDB resume replication after the last
// transaction in its own binary log. gtid_slave_pos only tracks replicated
// transactions, so a former primary would otherwise ask its new source for
// everything it wrote itself. With log_slave_updates (required) the binlog
// position covers all the server executed. MySQL's auto-positioning uses
// gtid_executed and needs nothing.
func (d Dialect) AlignReplicaPosition() []Statement {
	if d.mariaDB() {
		return []Statement{stmt("SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos")}
	}
	return nil
}

// WaitForGTID blocks server-side until set is executed or timeout passes. It
// returns the statement and the result value that means "timed out".
// MASTER_GTID_WAIT follows @@gtid_slave_pos, so on MariaDB it only waits for
// replicated transactions, which is what a replica catching up needs.
func (d Dialect) WaitForGTID(set string, timeout time.Duration) (Statement, int64) {
	seconds := timeout.Seconds()
	if d.mariaDB() {
		return stmt("SELECT MASTER_GTID_WAIT(?, ?)", set, seconds), -1
	}
	return stmt("SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", set, seconds), 1
}

// SemiSyncPlugins names the plugins MySQL needs for semi-sync, as
// (name, library) pairs for the source and the replica side. MariaDB has
// semi-sync built in and needs none.
func (d Dialect) SemiSyncPlugins() (source, replica [2]string, needed bool) {
	if d.mariaDB() {
		return source, replica, false
	}
	return [2]string{"rpl_semi_sync_source", "semisync_source.so"},
		[2]string{"rpl_semi_sync_replica", "semisync_replica.so"}, true
}

// PluginStatus reads whether a plugin is loaded.
func (d Dialect) PluginStatus(name string) Statement {
	return stmt("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?", name)
}

// InstallPlugin loads a plugin library. It is persisted by the server, so it
// runs once per data directory.
func (d Dialect) InstallPlugin(name, library string) Statement {
	return stmt(fmt.Sprintf("INSTALL PLUGIN %s SONAME '%s'", name, library))
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// SemiSyncSource switches source-side semi-sync. Only the primary may have it
// on: a replica with it on and log_slave_updates stalls its applier waiting
// for acknowledgements nobody sends (measured on MariaDB 10.11).
//
// Switching on also sets the wait point to AFTER_SYNC (WaitPointAfterSync),
// before enabling: the commit waits for the acknowledgement after the binary
// log is synced and before the storage engine commits, so no other session
// sees a transaction that no replica has. MySQL's default already; MariaDB's
// is AFTER_COMMIT, where a transaction is visible (and may be read and acted
// on) before any replica has it.
func (d Dialect) SemiSyncSource(enabled bool, timeout time.Duration, waitForReplicas int) []Statement {
	ms := max(timeout.Milliseconds(), 1)
	n := d.names()
	out := []Statement{stmt("SET GLOBAL "+n.semiSourceTimeout+" = ?", ms)}
	if !d.mariaDB() {
		out = append(out, stmt("SET GLOBAL "+n.semiSourceWaitFor+" = ?", max(waitForReplicas, 1)))
	}
	if enabled {
		out = append(out, stmt("SET GLOBAL "+n.semiWaitPoint+" = '"+WaitPointAfterSync+"'"))
	}
	return append(out, stmt("SET GLOBAL "+n.semiSourceEnabled+" = "+onOff(enabled)))
}

// WaitPointAfterSync is the semi-sync wait point SemiSyncSource sets.
const WaitPointAfterSync = "AFTER_SYNC"

// SemiSyncReplica switches replica-side semi-sync. It takes effect when the IO
// thread next connects, so the caller restarts the IO thread.
func (d Dialect) SemiSyncReplica(enabled bool) Statement {
	if d.mariaDB() {
		return stmt("SET GLOBAL rpl_semi_sync_slave_enabled = " + onOff(enabled))
	}
	return stmt("SET GLOBAL rpl_semi_sync_replica_enabled = " + onOff(enabled))
}

// statusNames maps the fields of Status to this flavor's variable names.
type statusNames struct {
	superReadOnly, serverUUID, executed                     string
	semiSourceEnabled, semiSourceTimeout, semiSourceWaitFor string
	semiReplicaEnabled, semiSourceStatus, semiSourceClients string
	semiReplicaStatus, logReplicaUpdates                    string
	semiWaitPoint, semiSourceWaitSessions                   string
}

func (d Dialect) names() statusNames {
	if d.mariaDB() {
		return statusNames{
			executed:               "gtid_binlog_pos",
			semiSourceEnabled:      "rpl_semi_sync_master_enabled",
			semiSourceTimeout:      "rpl_semi_sync_master_timeout",
			semiReplicaEnabled:     "rpl_semi_sync_slave_enabled",
			semiSourceStatus:       "Rpl_semi_sync_master_status",
			semiSourceClients:      "Rpl_semi_sync_master_clients",
			semiReplicaStatus:      "Rpl_semi_sync_slave_status",
			logReplicaUpdates:      "log_slave_updates",
			semiWaitPoint:          "rpl_semi_sync_master_wait_point",
			semiSourceWaitSessions: "Rpl_semi_sync_master_wait_sessions",
		}
	}
	return statusNames{
		superReadOnly:          "super_read_only",
		serverUUID:             "server_uuid",
		executed:               "gtid_executed",
		semiSourceEnabled:      "rpl_semi_sync_source_enabled",
		semiSourceTimeout:      "rpl_semi_sync_source_timeout",
		semiSourceWaitFor:      "rpl_semi_sync_source_wait_for_replica_count",
		semiReplicaEnabled:     "rpl_semi_sync_replica_enabled",
		semiSourceStatus:       "Rpl_semi_sync_source_status",
		semiSourceClients:      "Rpl_semi_sync_source_clients",
		semiReplicaStatus:      "Rpl_semi_sync_replica_status",
		logReplicaUpdates:      "log_replica_updates",
		semiWaitPoint:          "rpl_semi_sync_source_wait_point",
		semiSourceWaitSessions: "Rpl_semi_sync_source_wait_sessions",
	}
}

func inList(names []string) string {
	quoted := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			quoted = append(quoted, "'"+n+"'")
		}
	}
	return strings.Join(quoted, ", ")
}

// ShowVariables reads every server variable Status needs in one round trip.
// SHOW ... WHERE tolerates variables that do not exist (semi-sync before its
// plugin is loaded), where SELECT @@x would fail.
func (d Dialect) ShowVariables() Statement {
	n := d.names()
	vars := []string{"read_only", "server_id", "version", "log_bin", "pid_file", n.logReplicaUpdates, n.superReadOnly,
		n.serverUUID, n.executed, n.semiSourceEnabled, n.semiSourceTimeout, n.semiSourceWaitFor, n.semiReplicaEnabled, n.semiWaitPoint}
	if d.mariaDB() {
		vars = append(vars, "gtid_current_pos", "gtid_slave_pos", "gtid_strict_mode", "gtid_domain_id", "gtid_binlog_state")
	} else {
		vars = append(vars, "gtid_mode")
	}
	return stmt("SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + inList(vars) + ")")
}

// ShowStatus reads the semi-sync counters in one round trip.
func (d Dialect) ShowStatus() Statement {
	n := d.names()
	return stmt("SHOW GLOBAL STATUS WHERE Variable_name IN (" +
		inList([]string{n.semiSourceStatus, n.semiSourceClients, n.semiReplicaStatus, n.semiSourceWaitSessions}) + ")")
}

// The dead-man switch is one event in a schema of the agent's own (see
// Instance.ArmDeadman). The agent creates both, never through the binary
// log, so neither reaches a replica.
const (
	DeadmanSchema = "mysqlha"
	DeadmanEvent  = "deadman"
)

// EventScheduler reads whether the server runs events: ON, OFF, or
// DISABLED (set at start-up, and then unchangeable until a restart).
func (d Dialect) EventScheduler() Statement { return stmt("SELECT @@global.event_scheduler") }

// EnableEventScheduler starts the event scheduler of a server where it is
// OFF. MariaDB requires SUPER for it, which the agent's user does not hold:
// there the server's configuration sets event_scheduler = ON.
func (d Dialect) EnableEventScheduler() Statement { return stmt("SET GLOBAL event_scheduler = ON") }

// DeadmanSession keeps the session's statements out of the binary log (so
// the event never reaches a replica, where it would arrive disabled anyway,
// nor a replica's GTID set) and makes CURRENT_TIMESTAMP plain UTC, so that
// no daylight saving jump of the server's time zone moves the event by an
// hour. RestoreSession undoes both before the connection returns to the
// pool.
func (d Dialect) DeadmanSession() Statement {
	return stmt("SET SESSION sql_log_bin = 0, time_zone = '+00:00'")
}

// RestoreSession: see DeadmanSession.
func (d Dialect) RestoreSession() Statement {
	return stmt("SET SESSION sql_log_bin = 1, time_zone = DEFAULT")
}

// CreateDeadmanSchema creates the agent's schema if it is missing.
func (d Dialect) CreateDeadmanSchema() Statement {
	return stmt("CREATE DATABASE IF NOT EXISTS " + DeadmanSchema)
}

// deadmanSchedule is the one-time schedule, after from the server's own
// clock. The server keeps whole seconds and drops the fraction, so the
// event fires up to a second early, never late; CURRENT_TIMESTAMP(6), as
// plain CURRENT_TIMESTAMP drops the fraction of now first, which would make
// that up to two seconds (measured on MariaDB 10.11). PRESERVE keeps the event
// after it fired, so that the next arming only alters it; MySQL otherwise
// drops the clause on ALTER, so it is repeated there.
func deadmanSchedule(after time.Duration) string {
	return fmt.Sprintf("ON SCHEDULE AT CURRENT_TIMESTAMP(6) + INTERVAL %d MICROSECOND ON COMPLETION PRESERVE ENABLE",
		max(after.Microseconds(), 0))
}

// CreateDeadman creates the dead-man event: at after from now, the server
// fences itself, with the statement of Fence.
func (d Dialect) CreateDeadman(after time.Duration) Statement {
	return stmt(fmt.Sprintf("CREATE EVENT IF NOT EXISTS %s.%s %s DO %s",
		DeadmanSchema, DeadmanEvent, deadmanSchedule(after), d.Fence()[0].SQL))
}

// ExtendDeadman moves the dead-man event to after from now, enabling it
// again if it already fired.
func (d Dialect) ExtendDeadman(after time.Duration) Statement {
	return stmt(fmt.Sprintf("ALTER EVENT %s.%s %s", DeadmanSchema, DeadmanEvent, deadmanSchedule(after)))
}
