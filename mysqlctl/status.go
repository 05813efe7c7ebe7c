package mysqlctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Status is what one server says about itself. A pointer field is nil when
// the flavor has no such thing (super_read_only on MariaDB).
type Status struct {
	Server   ServerInfo
	ServerID uint32
	// ServerUUID is MySQL's @@server_uuid; MariaDB has none.
	ServerUUID    string
	ReadOnly      bool
	SuperReadOnly *bool
	// GTIDExecuted is every transaction this server has executed, in the
	// flavor's own form: MySQL @@gtid_executed (a UUID set), MariaDB
	// @@gtid_binlog_pos (a domain-server-seq list). MariaDB's binlog position
	// is used because, with log_slave_updates, it covers both replicated and
	// local transactions, so errant writes show up in it.
	GTIDExecuted string
	// MariaDB only: @@gtid_current_pos, @@gtid_slave_pos, @@gtid_strict_mode.
	GTIDCurrentPos string
	GTIDSlavePos   string
	// GTIDBinlogState (MariaDB) is @@gtid_binlog_state: the last GTID each
	// server logged in each domain. Unlike the position, it shows a fork:
	// a transaction another server never had, even at a lower seq_no.
	GTIDBinlogState string
	GTIDStrictMode  bool
	// LogBin and LogReplicaUpdates must both be on for a member to be a
	// candidate: a promoted replica needs the binlog its peers will pull.
	LogBin            bool
	LogReplicaUpdates bool
	SemiSync          SemiSyncStatus
	// PIDFile is @@pid_file: where the server writes its process id, as
	// seen from its own mount namespace.
	PIDFile string
}

// SourceMisconfigured lists the settings the server lacks to serve as a
// source after a promotion; empty when it has them. Without the binary
// log, or without replicated transactions in it (log_slave_updates,
// log_replica_updates on MySQL), its replicas could not pull the whole
// history from it.
func (s Status) SourceMisconfigured() []string {
	var missing []string
	if !s.LogBin {
		missing = append(missing, "log_bin is OFF")
	}
	if !s.LogReplicaUpdates {
		missing = append(missing, "log_slave_updates (log_replica_updates on MySQL) is OFF")
	}
	return missing
}

// Fenced reports whether the server refuses writes from every client but
// replication, as Fence leaves it: read_only on MariaDB (whose application
// users must not hold READ_ONLY ADMIN), super_read_only on MySQL. On MySQL
// read_only alone is not fenced, because users with SUPER or
// CONNECTION_ADMIN still write; nor is a MySQL server whose super_read_only
// is unknown.
func (s Status) Fenced() bool {
	switch {
	case s.SuperReadOnly != nil:
		return s.ReadOnly && *s.SuperReadOnly
	case s.Server.Flavor == gtid.MySQL:
		return false
	default:
		return s.ReadOnly
	}
}

// Writable reports whether some client could write now: exactly !Fenced(),
// so a MySQL server with read_only=ON but super_read_only=OFF is writable.
func (s Status) Writable() bool { return !s.Fenced() }

// SemiSyncStatus is both sides of semi-synchronous replication.
type SemiSyncStatus struct {
	// SourceEnabled is the setting; SourceActive is whether the source is
	// really waiting for acknowledgements now (it falls back to async after
	// the timeout).
	SourceEnabled bool
	SourceActive  bool
	// SourceClients counts the replicas connected with semi-sync on: the
	// ones that acknowledge.
	SourceClients int
	// SourceWaitSessions counts the commits waiting for an acknowledgement
	// now: with none to come, the primary is stalled.
	SourceWaitSessions int
	SourceTimeout      time.Duration
	// WaitPoint is AFTER_SYNC or AFTER_COMMIT; "" when unknown.
	WaitPoint      string
	WaitForReplica int
	// ReplicaEnabled is the setting; ReplicaActive says the receiver runs
	// (or retries) as an acknowledging semi-sync replica.
	ReplicaEnabled bool
	ReplicaActive  bool
}

// ThreadState is the state of a replication thread.
type ThreadState int

const (
	ThreadStopped ThreadState = iota
	ThreadConnecting
	ThreadRunning
)

func (t ThreadState) String() string {
	switch t {
	case ThreadRunning:
		return "running"
	case ThreadConnecting:
		return "connecting"
	default:
		return "stopped"
	}
}

func parseThreadState(s string) ThreadState {
	switch strings.ToLower(s) {
	case "yes":
		return ThreadRunning
	case "connecting", "preparing":
		return ThreadConnecting
	default:
		return ThreadStopped
	}
}

// ReplicaStatus is one row of SHOW REPLICA STATUS, flavor-neutral.
type ReplicaStatus struct {
	SourceHost     string
	SourcePort     int
	SourceUser     string
	SourceServerID uint32
	IOThread       ThreadState
	SQLThread      ThreadState
	LastIOErrno    int
	LastIOError    string
	LastSQLErrno   int
	LastSQLError   string
	// SecondsBehind is nil when the server does not know (NULL), e.g. while
	// the IO thread is disconnected.
	SecondsBehind *int64
	// RetrievedGTID is what the IO thread has received: MySQL
	// Retrieved_Gtid_Set, MariaDB Gtid_IO_Pos.
	RetrievedGTID string
	// ExecutedGTID is what has been applied: MySQL Executed_Gtid_Set,
	// MariaDB @@gtid_slave_pos.
	ExecutedGTID string
	// AutoPosition is GTID auto-positioning (MySQL Auto_Position=1,
	// MariaDB Using_Gtid other than No).
	AutoPosition bool
	SQLState     string
}

// Broken reports a replication error that will not heal by itself: a thread
// stopped with an error. A connecting IO thread is not broken.
func (r ReplicaStatus) Broken() bool {
	return (r.SQLThread == ThreadStopped && r.LastSQLErrno != 0) ||
		(r.IOThread == ThreadStopped && r.LastIOErrno != 0)
}

// Streaming reports both threads running.
func (r ReplicaStatus) Streaming() bool {
	return r.IOThread == ThreadRunning && r.SQLThread == ThreadRunning
}

// Connection is one session in the process list.
type Connection struct {
	ID      uint64
	User    string
	Host    string
	Command string
	Time    int64
}

// Observation is one full observe pass of a server.
type Observation struct {
	Status Status
	// Replica is nil when the server has no replication configured.
	Replica *ReplicaStatus
}

func parseBool(s string) bool {
	switch strings.ToUpper(s) {
	case "ON", "1", "YES", "TRUE":
		return true
	}
	return false
}

// parseStatus turns SHOW GLOBAL VARIABLES/STATUS rows into a Status.
func (d Dialect) parseStatus(vars, stat map[string]string) (Status, error) {
	n := d.names()
	st := Status{
		Server:            d.Server,
		ServerUUID:        vars[n.serverUUID],
		ReadOnly:          parseBool(vars["read_only"]),
		GTIDExecuted:      vars[n.executed],
		LogBin:            parseBool(vars["log_bin"]),
		LogReplicaUpdates: parseBool(vars[n.logReplicaUpdates]),
		GTIDCurrentPos:    vars["gtid_current_pos"],
		GTIDSlavePos:      vars["gtid_slave_pos"],
		GTIDBinlogState:   vars["gtid_binlog_state"],
		GTIDStrictMode:    parseBool(vars["gtid_strict_mode"]),
		PIDFile:           vars["pid_file"],
	}
	id, err := strconv.ParseUint(vars["server_id"], 10, 32)
	if err != nil {
		return Status{}, fmt.Errorf("reading server_id %q: %w", vars["server_id"], err)
	}
	st.ServerID = uint32(id)
	if v, ok := vars[n.superReadOnly]; ok && n.superReadOnly != "" {
		b := parseBool(v)
		st.SuperReadOnly = &b
	}
	// MySQL prints multi-UUID sets across lines; keep the canonical one-line form.
	st.GTIDExecuted = strings.ReplaceAll(st.GTIDExecuted, "\n", "")

	ss := &st.SemiSync
	ss.SourceEnabled = parseBool(vars[n.semiSourceEnabled])
	ss.ReplicaEnabled = parseBool(vars[n.semiReplicaEnabled])
	if ms, err := strconv.ParseInt(vars[n.semiSourceTimeout], 10, 64); err == nil {
		ss.SourceTimeout = time.Duration(ms) * time.Millisecond
	}
	ss.WaitForReplica = 1
	if c, err := strconv.Atoi(vars[n.semiSourceWaitFor]); err == nil {
		ss.WaitForReplica = c
	}
	ss.SourceActive = parseBool(stat[n.semiSourceStatus])
	ss.ReplicaActive = parseBool(stat[n.semiReplicaStatus])
	ss.SourceClients, _ = strconv.Atoi(stat[n.semiSourceClients])
	ss.SourceWaitSessions, _ = strconv.Atoi(stat[n.semiSourceWaitSessions])
	ss.WaitPoint = strings.ToUpper(vars[n.semiWaitPoint])
	return st, nil
}

// column returns the first of the given SHOW REPLICA STATUS columns that is
// present: MySQL 8 says Source_*/Replica_*, MariaDB keeps Master_*/Slave_*.
func column(row map[string]*string, names ...string) (string, bool) {
	for _, n := range names {
		if v, ok := row[n]; ok {
			if v == nil {
				return "", false
			}
			return *v, true
		}
	}
	return "", false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// parseReplicaStatus maps one SHOW REPLICA STATUS row (nil values are NULL).
func parseReplicaStatus(row map[string]*string) ReplicaStatus {
	get := func(names ...string) string { v, _ := column(row, names...); return v }
	r := ReplicaStatus{
		SourceHost:    get("Source_Host", "Master_Host"),
		SourcePort:    atoi(get("Source_Port", "Master_Port")),
		SourceUser:    get("Source_User", "Master_User"),
		IOThread:      parseThreadState(get("Replica_IO_Running", "Slave_IO_Running")),
		SQLThread:     parseThreadState(get("Replica_SQL_Running", "Slave_SQL_Running")),
		LastIOErrno:   atoi(get("Last_IO_Errno")),
		LastIOError:   get("Last_IO_Error"),
		LastSQLErrno:  atoi(get("Last_SQL_Errno")),
		LastSQLError:  get("Last_SQL_Error"),
		RetrievedGTID: strings.ReplaceAll(get("Retrieved_Gtid_Set", "Gtid_IO_Pos"), "\n", ""),
		ExecutedGTID:  strings.ReplaceAll(get("Executed_Gtid_Set"), "\n", ""),
		SQLState:      get("Replica_SQL_Running_State", "Slave_SQL_Running_State"),
	}
	if id, err := strconv.ParseUint(get("Source_Server_Id", "Master_Server_Id"), 10, 32); err == nil {
		r.SourceServerID = uint32(id)
	}
	if v, ok := column(row, "Seconds_Behind_Source", "Seconds_Behind_Master"); ok {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			r.SecondsBehind = &s
		}
	}
	if v, ok := column(row, "Auto_Position"); ok {
		r.AutoPosition = v == "1"
	} else if v, ok := column(row, "Using_Gtid"); ok {
		r.AutoPosition = v != "" && !strings.EqualFold(v, "No")
	}
	return r
}

// Threads and users that are never client sessions: the server's own
// background threads and both ends of replication.
var (
	systemUsers      = map[string]bool{"system user": true, "event_scheduler": true, "": true}
	internalCommands = map[string]bool{
		"binlog dump": true, "binlog dump gtid": true, "daemon": true,
		"slave_io": true, "slave_sql": true, "slave_worker": true,
		"register slave": true, "register replica": true,
		// Already being killed: it will end without running anything more.
		"killed": true,
	}
)

// ClientConnections filters conns down to client sessions, skipping system
// threads, replication threads and the given users (the agent's own and the
// replication user), which must survive a fence.
func ClientConnections(conns []Connection, skipUsers ...string) []Connection {
	skip := make(map[string]bool, len(skipUsers))
	for _, u := range skipUsers {
		skip[u] = true
	}
	var out []Connection
	for _, c := range conns {
		if systemUsers[c.User] || skip[c.User] || internalCommands[strings.ToLower(c.Command)] {
			continue
		}
		out = append(out, c)
	}
	return out
}
