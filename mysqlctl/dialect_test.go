package mysqlctl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

var (
	mysql80 = Dialect{Server: ServerInfo{Flavor: gtid.MySQL, Version: Version{8, 0, 36}}}
	mysql84 = Dialect{Server: ServerInfo{Flavor: gtid.MySQL, Version: Version{8, 4, 3}}}
	mariadb = Dialect{Server: ServerInfo{Flavor: gtid.MariaDB, Version: Version{10, 11, 9}}}
)

func sqls(stmts ...Statement) []string {
	if len(stmts) == 0 {
		return nil
	}
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = s.SQL
	}
	return out
}

// TestDialectStatements pins every statement each flavor runs. The MySQL rows
// are this project's only check of the MySQL dialect: no MySQL server can be
// installed in its test environment.
func TestDialectStatements(t *testing.T) {
	cases := []struct {
		name                    string
		got                     func(Dialect) []string
		mysql80, mysql84, maria []string
	}{
		{"fence", func(d Dialect) []string { return sqls(d.Fence()...) },
			[]string{"SET GLOBAL super_read_only = ON"}, []string{"SET GLOBAL super_read_only = ON"},
			[]string{"SET GLOBAL read_only = ON"}},
		{"unfence", func(d Dialect) []string { return sqls(d.Unfence()...) },
			[]string{"SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"},
			[]string{"SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"},
			[]string{"SET GLOBAL read_only = OFF"}},
		{"fence state", func(d Dialect) []string { return sqls(d.FenceState()) },
			[]string{"SELECT @@global.read_only, @@global.super_read_only"},
			[]string{"SELECT @@global.read_only, @@global.super_read_only"},
			[]string{"SELECT @@global.read_only"}},
		{"fence releases semi-sync waits", func(d Dialect) []string {
			return sqls(d.SemiSyncWaitSessions(), d.DisableSemiSyncSource())
		},
			[]string{"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_wait_sessions'", "SET GLOBAL rpl_semi_sync_source_enabled = OFF"},
			[]string{"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_wait_sessions'", "SET GLOBAL rpl_semi_sync_source_enabled = OFF"},
			[]string{"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'", "SET GLOBAL rpl_semi_sync_master_enabled = OFF"}},
		{"lock wait", func(d Dialect) []string { return sqls(d.SessionLockWaitTimeout(0), d.SessionLockWaitTimeout(3)) },
			[]string{"SET SESSION lock_wait_timeout = 1", "SET SESSION lock_wait_timeout = 3"},
			[]string{"SET SESSION lock_wait_timeout = 1", "SET SESSION lock_wait_timeout = 3"},
			[]string{"SET SESSION lock_wait_timeout = 1", "SET SESSION lock_wait_timeout = 3"}},
		{"kill", func(d Dialect) []string { return sqls(d.KillConnection(42)) },
			[]string{"KILL CONNECTION 42"}, []string{"KILL CONNECTION 42"}, []string{"KILL HARD CONNECTION 42"}},
		{"replication threads", func(d Dialect) []string {
			return sqls(d.StopReplica(), d.StopReplicaIOThread(), d.StartReplica(), d.StartReplicaIOThread(), d.ResetReplicaAll(), d.ShowReplicaStatus())
		},
			[]string{"STOP REPLICA", "STOP REPLICA IO_THREAD", "START REPLICA", "START REPLICA IO_THREAD", "RESET REPLICA ALL", "SHOW REPLICA STATUS"},
			[]string{"STOP REPLICA", "STOP REPLICA IO_THREAD", "START REPLICA", "START REPLICA IO_THREAD", "RESET REPLICA ALL", "SHOW REPLICA STATUS"},
			[]string{"STOP SLAVE", "STOP SLAVE IO_THREAD", "START SLAVE", "START SLAVE IO_THREAD", "RESET SLAVE ALL", "SHOW REPLICA STATUS"}},
		{"align replica position", func(d Dialect) []string { return sqls(d.AlignReplicaPosition()...) },
			nil, nil, []string{"SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos"}},
		{"reset binary logs", func(d Dialect) []string { return sqls(d.ResetBinaryLogs()) },
			[]string{"RESET MASTER"}, []string{"RESET BINARY LOGS AND GTIDS"}, []string{"RESET MASTER"}},
		{"replica semi-sync", func(d Dialect) []string { return sqls(d.SemiSyncReplica(true), d.SemiSyncReplica(false)) },
			[]string{"SET GLOBAL rpl_semi_sync_replica_enabled = ON", "SET GLOBAL rpl_semi_sync_replica_enabled = OFF"},
			[]string{"SET GLOBAL rpl_semi_sync_replica_enabled = ON", "SET GLOBAL rpl_semi_sync_replica_enabled = OFF"},
			[]string{"SET GLOBAL rpl_semi_sync_slave_enabled = ON", "SET GLOBAL rpl_semi_sync_slave_enabled = OFF"}},
		{"source semi-sync", func(d Dialect) []string { return sqls(d.SemiSyncSource(true, 2*time.Second, 2)...) },
			[]string{"SET GLOBAL rpl_semi_sync_source_timeout = ?", "SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = ?",
				"SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'", "SET GLOBAL rpl_semi_sync_source_enabled = ON"},
			[]string{"SET GLOBAL rpl_semi_sync_source_timeout = ?", "SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = ?",
				"SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'", "SET GLOBAL rpl_semi_sync_source_enabled = ON"},
			[]string{"SET GLOBAL rpl_semi_sync_master_timeout = ?", "SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'",
				"SET GLOBAL rpl_semi_sync_master_enabled = ON"}},
		{"plugins", func(d Dialect) []string {
			src, rep, needed := d.SemiSyncPlugins()
			if !needed {
				return nil
			}
			return sqls(d.PluginStatus(src[0]), d.InstallPlugin(src[0], src[1]), d.InstallPlugin(rep[0], rep[1]))
		},
			[]string{"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?",
				"INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'", "INSTALL PLUGIN rpl_semi_sync_replica SONAME 'semisync_replica.so'"},
			[]string{"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = ?",
				"INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'", "INSTALL PLUGIN rpl_semi_sync_replica SONAME 'semisync_replica.so'"},
			nil},
		{"dead-man switch", func(d Dialect) []string {
			return sqls(d.EventScheduler(), d.EnableEventScheduler(), d.DeadmanSession(), d.ExtendDeadman(2500*time.Millisecond),
				d.CreateDeadmanSchema(), d.CreateDeadman(2500*time.Millisecond), d.RestoreSession())
		},
			deadmanSQL("SET GLOBAL super_read_only = ON"), deadmanSQL("SET GLOBAL super_read_only = ON"), deadmanSQL("SET GLOBAL read_only = ON")},
		{"show variables", func(d Dialect) []string { return sqls(d.ShowVariables(), d.ShowStatus()) },
			[]string{"SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'server_id', 'version', 'log_bin', 'pid_file', 'log_replica_updates', " +
				"'super_read_only', 'server_uuid', 'gtid_executed', 'rpl_semi_sync_source_enabled', 'rpl_semi_sync_source_timeout', " +
				"'rpl_semi_sync_source_wait_for_replica_count', 'rpl_semi_sync_replica_enabled', 'rpl_semi_sync_source_wait_point', 'gtid_mode')",
				"SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_clients', 'Rpl_semi_sync_replica_status', " +
					"'Rpl_semi_sync_source_wait_sessions')"},
			[]string{"SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'server_id', 'version', 'log_bin', 'pid_file', 'log_replica_updates', " +
				"'super_read_only', 'server_uuid', 'gtid_executed', 'rpl_semi_sync_source_enabled', 'rpl_semi_sync_source_timeout', " +
				"'rpl_semi_sync_source_wait_for_replica_count', 'rpl_semi_sync_replica_enabled', 'rpl_semi_sync_source_wait_point', 'gtid_mode')",
				"SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_clients', 'Rpl_semi_sync_replica_status', " +
					"'Rpl_semi_sync_source_wait_sessions')"},
			[]string{"SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'server_id', 'version', 'log_bin', 'pid_file', 'log_slave_updates', " +
				"'gtid_binlog_pos', 'rpl_semi_sync_master_enabled', 'rpl_semi_sync_master_timeout', 'rpl_semi_sync_slave_enabled', " +
				"'rpl_semi_sync_master_wait_point', 'gtid_current_pos', 'gtid_slave_pos', 'gtid_strict_mode', 'gtid_domain_id', 'gtid_binlog_state')",
				"SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_clients', 'Rpl_semi_sync_slave_status', " +
					"'Rpl_semi_sync_master_wait_sessions')"}},
	}
	for _, c := range cases {
		for _, f := range []struct {
			name string
			d    Dialect
			want []string
		}{{"mysql8.0", mysql80, c.mysql80}, {"mysql8.4", mysql84, c.mysql84}, {"mariadb10.11", mariadb, c.maria}} {
			if got := c.got(f.d); !reflect.DeepEqual(got, f.want) {
				t.Errorf("%s/%s:\n got  %q\n want %q", c.name, f.name, got, f.want)
			}
		}
	}
}

// deadmanSQL is what arming the dead-man switch runs, for 2.5 s, with fence
// as the event's body.
func deadmanSQL(fence string) []string {
	at := "ON SCHEDULE AT CURRENT_TIMESTAMP(6) + INTERVAL 2500000 MICROSECOND ON COMPLETION PRESERVE ENABLE"
	return []string{
		"SELECT @@global.event_scheduler",
		"SET GLOBAL event_scheduler = ON",
		"SET SESSION sql_log_bin = 0, time_zone = '+00:00'",
		"ALTER EVENT mysqlha.deadman " + at,
		"CREATE DATABASE IF NOT EXISTS mysqlha",
		"CREATE EVENT IF NOT EXISTS mysqlha.deadman " + at + " DO " + fence,
		"SET SESSION sql_log_bin = 1, time_zone = DEFAULT",
	}
}

func TestChangeSource(t *testing.T) {
	src := Source{Host: "db-0.db", Port: 3306, User: "repl", Password: "p'w", ConnectRetry: 2 * time.Second, HeartbeatPeriod: 500 * time.Millisecond}
	wantArgs := []any{"db-0.db", 3306, "repl", "p'w", 2, 0.5}
	cases := []struct {
		d    Dialect
		want string
	}{
		{mysql80, "CHANGE REPLICATION SOURCE TO SOURCE_HOST = ?, SOURCE_PORT = ?, SOURCE_USER = ?, SOURCE_PASSWORD = ?, " +
			"SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = ?, SOURCE_RETRY_COUNT = 86400, SOURCE_HEARTBEAT_PERIOD = ?, GET_SOURCE_PUBLIC_KEY = 1"},
		{mysql84, "CHANGE REPLICATION SOURCE TO SOURCE_HOST = ?, SOURCE_PORT = ?, SOURCE_USER = ?, SOURCE_PASSWORD = ?, " +
			"SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = ?, SOURCE_RETRY_COUNT = 86400, SOURCE_HEARTBEAT_PERIOD = ?, GET_SOURCE_PUBLIC_KEY = 1"},
		{mariadb, "CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, " +
			"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = ?, MASTER_HEARTBEAT_PERIOD = ?"},
	}
	for _, c := range cases {
		got := c.d.ChangeSource(src)
		if got.SQL != c.want || !reflect.DeepEqual(got.Args, wantArgs) {
			t.Errorf("%s:\n got  %q %v\n want %q %v", c.d.Server.Version, got.SQL, got.Args, c.want, wantArgs)
		}
	}
	// TLS: the files are the replica's, verified when a CA is given.
	tlsSrc := src
	tlsSrc.TLS = &SourceTLS{CA: "/etc/mysql/tls/ca.pem", Cert: "/etc/mysql/tls/repl.pem", Key: "/etc/mysql/tls/repl-key.pem"}
	for _, c := range []struct {
		d    Dialect
		want string
	}{
		{mysql84, cases[1].want + ", SOURCE_SSL = 1, SOURCE_SSL_CA = ?, SOURCE_SSL_CERT = ?, SOURCE_SSL_KEY = ?, SOURCE_SSL_VERIFY_SERVER_CERT = 1"},
		{mariadb, cases[2].want + ", MASTER_SSL = 1, MASTER_SSL_CA = ?, MASTER_SSL_CERT = ?, MASTER_SSL_KEY = ?, MASTER_SSL_VERIFY_SERVER_CERT = 1"},
	} {
		got := c.d.ChangeSource(tlsSrc)
		want := append(append([]any(nil), wantArgs...), tlsSrc.TLS.CA, tlsSrc.TLS.Cert, tlsSrc.TLS.Key)
		if got.SQL != c.want || !reflect.DeepEqual(got.Args, want) {
			t.Errorf("TLS %s:\n got  %q %v\n want %q %v", c.d.Server.Version, got.SQL, got.Args, c.want, want)
		}
	}
	if got := mariadb.ChangeSource(Source{Host: "h", Port: 1, User: "u", TLS: &SourceTLS{}}); strings.Contains(got.SQL, "VERIFY") {
		t.Errorf("TLS without a CA verifies nothing, yet: %s", got.SQL)
	}
	// Unset timings fall back to 1 s rather than the server's 60 s default.
	if got := mariadb.ChangeSource(Source{Host: "h", Port: 1, User: "u"}); !reflect.DeepEqual(got.Args[4:], []any{1, 1.0}) {
		t.Errorf("defaults: %v", got.Args)
	}
}

func TestWaitForGTIDStatement(t *testing.T) {
	s, timedOut := mysql84.WaitForGTID("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", 1500*time.Millisecond)
	if s.SQL != "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)" || timedOut != 1 || s.Args[1] != 1.5 {
		t.Errorf("mysql: %q %v %d", s.SQL, s.Args, timedOut)
	}
	s, timedOut = mariadb.WaitForGTID("0-1-5", 2*time.Second)
	if s.SQL != "SELECT MASTER_GTID_WAIT(?, ?)" || timedOut != -1 || s.Args[0] != "0-1-5" || s.Args[1] != 2.0 {
		t.Errorf("mariadb: %q %v %d", s.SQL, s.Args, timedOut)
	}
	ms := mariadb.SemiSyncSource(false, 0, 0)
	if ms[0].Args[0] != int64(1) || ms[1].SQL != "SET GLOBAL rpl_semi_sync_master_enabled = OFF" {
		t.Errorf("semi-sync off: %+v", ms)
	}
	if len(ms) != 2 {
		t.Errorf("switching semi-sync off sets no wait point: %+v", ms)
	}
	my := mysql80.SemiSyncSource(true, 1500*time.Millisecond, 0)
	if my[0].Args[0] != int64(1500) || my[1].Args[0] != 1 {
		t.Errorf("mysql semi-sync args: %+v", my)
	}
}

func TestParseServerVersion(t *testing.T) {
	cases := []struct {
		raw     string
		flavor  gtid.Flavor
		version Version
		err     string
	}{
		{"8.0.36", gtid.MySQL, Version{8, 0, 36}, ""},
		{"8.4.3-log", gtid.MySQL, Version{8, 4, 3}, ""},
		{"9.1.0", gtid.MySQL, Version{9, 1, 0}, ""},
		{"10.11.19-MariaDB-0+deb12u1-log", gtid.MariaDB, Version{10, 11, 19}, ""},
		{"11.4.2-MariaDB", gtid.MariaDB, Version{11, 4, 2}, ""},
		{"8.0.25", 0, Version{}, "older than the minimum supported mysql 8.0.26"},
		{"5.7.44-log", 0, Version{}, "older than the minimum"},
		{"10.5.9-MariaDB", 0, Version{}, "older than the minimum supported mariadb 10.6.0"},
		{"", 0, Version{}, "cannot parse server version"},
		{"x.y.z", 0, Version{}, "cannot parse server version"},
		{"8.-1.2", 0, Version{}, "cannot parse server version"},
	}
	for _, c := range cases {
		info, err := ParseServerVersion(c.raw)
		if c.err != "" {
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, want ErrUnsupported containing %q", c.raw, err, c.err)
			}
			continue
		}
		if err != nil || info.Flavor != c.flavor || info.Version != c.version {
			t.Errorf("%q: got %+v %v", c.raw, info, err)
		}
	}
}

func TestParseStatusMySQL(t *testing.T) {
	vars := map[string]string{
		"read_only": "ON", "super_read_only": "ON", "server_id": "7", "server_uuid": "3e11fa47-71ca-11e1-9e33-c80aa9429562",
		"gtid_executed": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1",
		"log_bin":       "ON", "log_replica_updates": "ON", "rpl_semi_sync_source_enabled": "ON",
		"rpl_semi_sync_source_timeout": "2500", "rpl_semi_sync_source_wait_for_replica_count": "2",
		"rpl_semi_sync_source_wait_point": "AFTER_SYNC", "pid_file": "/var/run/mysqld/mysqld.pid",
	}
	stat := map[string]string{"Rpl_semi_sync_source_status": "ON", "Rpl_semi_sync_source_clients": "2",
		"Rpl_semi_sync_source_wait_sessions": "3"}
	st, err := mysql84.parseStatus(vars, stat)
	if err != nil {
		t.Fatal(err)
	}
	if st.ServerID != 7 || st.PIDFile != "/var/run/mysqld/mysqld.pid" || st.SuperReadOnly == nil || !*st.SuperReadOnly || st.Writable() || !st.LogReplicaUpdates ||
		st.GTIDExecuted != "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:1" {
		t.Errorf("status %+v", st)
	}
	want := SemiSyncStatus{SourceEnabled: true, SourceActive: true, SourceClients: 2, SourceTimeout: 2500 * time.Millisecond, WaitForReplica: 2,
		SourceWaitSessions: 3, WaitPoint: "AFTER_SYNC"}
	if st.SemiSync != want {
		t.Errorf("semi-sync %+v, want %+v", st.SemiSync, want)
	}
	// Plugin not loaded: variables absent, everything off, nothing fails.
	st, err = mysql80.parseStatus(map[string]string{"server_id": "1", "read_only": "OFF", "super_read_only": "OFF"}, nil)
	if err != nil || !st.Writable() || st.SemiSync.SourceEnabled {
		t.Errorf("no plugin: %+v %v", st, err)
	}
	if _, err := mysql80.parseStatus(map[string]string{"server_id": "x"}, nil); err == nil {
		t.Error("garbage server_id accepted")
	}
}

// TestFenced: on MySQL only super_read_only fences (a SUPER user writes
// through read_only); on MariaDB read_only does; Writable is its negation.
func TestFenced(t *testing.T) {
	on, off := true, false
	cases := []struct {
		name          string
		flavor        gtid.Flavor
		readOnly      bool
		superReadOnly *bool
		fenced        bool
	}{
		{"mysql both on", gtid.MySQL, true, &on, true},
		{"mysql read_only only", gtid.MySQL, true, &off, false},
		{"mysql both off", gtid.MySQL, false, &off, false},
		{"mysql super_read_only unknown", gtid.MySQL, true, nil, false},
		{"mariadb read_only", gtid.MariaDB, true, nil, true},
		{"mariadb writable", gtid.MariaDB, false, nil, false},
		{"flavor unknown, read_only", gtid.Flavor(0), true, nil, true},
		{"flavor unknown, writable", gtid.Flavor(0), false, nil, false},
	}
	for _, c := range cases {
		st := Status{Server: ServerInfo{Flavor: c.flavor}, ReadOnly: c.readOnly, SuperReadOnly: c.superReadOnly}
		if st.Fenced() != c.fenced || st.Writable() == c.fenced {
			t.Errorf("%s: Fenced() = %v, Writable() = %v; want fenced %v", c.name, st.Fenced(), st.Writable(), c.fenced)
		}
	}
	// Parsed from SHOW GLOBAL VARIABLES, as Observe does.
	st, err := mysql84.parseStatus(map[string]string{"server_id": "1", "read_only": "ON", "super_read_only": "OFF"}, nil)
	if err != nil || st.Fenced() || !st.Writable() {
		t.Errorf("mysql read_only=ON super_read_only=OFF: fenced %v writable %v (%v), want writable", st.Fenced(), st.Writable(), err)
	}
	st, err = mariadb.parseStatus(map[string]string{"server_id": "1", "read_only": "ON"}, nil)
	if err != nil || !st.Fenced() || st.Writable() {
		t.Errorf("mariadb read_only=ON: fenced %v writable %v (%v), want fenced", st.Fenced(), st.Writable(), err)
	}
}

func TestParseReplicaStatusMySQL(t *testing.T) {
	s := func(v string) *string { return &v }
	row := map[string]*string{
		"Source_Host": s("db-0"), "Source_Port": s("3306"), "Source_User": s("repl"), "Source_Server_Id": s("1"),
		"Replica_IO_Running": s("Connecting"), "Replica_SQL_Running": s("Yes"), "Last_IO_Errno": s("2003"),
		"Last_IO_Error": s("can't connect"), "Last_SQL_Errno": s("0"), "Last_SQL_Error": s(""),
		"Seconds_Behind_Source": nil, "Retrieved_Gtid_Set": s("u:1-10"), "Executed_Gtid_Set": s("u:1-9,\nv:1"),
		"Auto_Position": s("1"), "Replica_SQL_Running_State": s("Replica has read all relay log"),
	}
	r := parseReplicaStatus(row)
	if r.SourceHost != "db-0" || r.SourcePort != 3306 || r.SourceServerID != 1 || r.IOThread != ThreadConnecting ||
		r.SQLThread != ThreadRunning || r.SecondsBehind != nil || r.ExecutedGTID != "u:1-9,v:1" || !r.AutoPosition ||
		r.Broken() || r.Streaming() {
		t.Errorf("%+v", r)
	}
	row["Replica_SQL_Running"], row["Last_SQL_Errno"] = s("No"), s("1062")
	if !parseReplicaStatus(row).Broken() {
		t.Error("SQL thread stopped with an error is not reported broken")
	}
}

func TestClientConnections(t *testing.T) {
	conns := []Connection{
		{ID: 1, User: "system user", Command: "Slave_IO"},
		{ID: 2, User: "repl", Command: "Binlog Dump GTID"},
		{ID: 3, User: "event_scheduler", Command: "Daemon"},
		{ID: 4, User: "mysqlha", Command: "Sleep"},
		{ID: 5, User: "app", Command: "Query"},
		{ID: 6, User: "app", Command: "Sleep"},
		{ID: 7, User: "other-repl", Command: "Binlog Dump"},
		{ID: 8, User: "root", Command: "Query"},
		{ID: 9, User: "app", Command: "Killed"},
	}
	var ids []uint64
	for _, c := range ClientConnections(conns, "mysqlha", "repl") {
		ids = append(ids, c.ID)
	}
	if !reflect.DeepEqual(ids, []uint64{5, 6, 8}) {
		t.Errorf("kept %v, want [5 6 8]", ids)
	}
}

// TestSourceMisconfigured: a server without the binary log, or without
// replicated transactions in it, cannot serve as a source.
func TestSourceMisconfigured(t *testing.T) {
	for _, c := range []struct {
		logBin, replicaUpdates bool
		want                   string
	}{
		{true, true, ""},
		{false, true, "log_bin is OFF"},
		{true, false, "log_slave_updates (log_replica_updates on MySQL) is OFF"},
		{false, false, "log_bin is OFF; log_slave_updates (log_replica_updates on MySQL) is OFF"},
	} {
		got := strings.Join(Status{LogBin: c.logBin, LogReplicaUpdates: c.replicaUpdates}.SourceMisconfigured(), "; ")
		if got != c.want {
			t.Errorf("log_bin %v, log_slave_updates %v: %q, want %q", c.logBin, c.replicaUpdates, got, c.want)
		}
	}
}
