package backup_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/backup"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

func exec(t testing.TB, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func scalar(t testing.TB, db *sql.DB, q string) string {
	t.Helper()
	var s sql.NullString
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s.String
}

func follow(t testing.TB, db *sql.DB, src *mysqltest.Server) {
	t.Helper()
	exec(t, db, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos",
		src.Host, src.Port, mysqltest.ReplUser, mysqltest.ReplPassword), "START SLAVE")
}

// waitReplica waits until db's IO and SQL threads run and it executed gtid,
// or fails with the replication error.
func waitReplica(t testing.TB, db *sql.DB, gtid string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok int
		if err := db.QueryRow("SELECT MASTER_GTID_WAIT(?, 1)", gtid).Scan(&ok); err == nil && ok == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not reach %s: %s", gtid, replicaError(t, db))
		}
	}
}

func countRows(t testing.TB, db *sql.DB, q string) int {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n
}

func replicaError(t testing.TB, db *sql.DB) string {
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		rows.Scan(ptrs...)
		for i, c := range cols {
			if c == "Slave_IO_Running" || c == "Slave_SQL_Running" || c == "Last_IO_Error" || c == "Last_SQL_Error" {
				out = append(out, c+"="+string(vals[i]))
			}
		}
	}
	return strings.Join(out, " ")
}

// rebuild copies donor's data to target the way the agent does: stream,
// extract and prepare while target still runs, then stop it, swap, start it,
// and set its GTID position from the backup.
func rebuild(t testing.TB, donor, target *mysqltest.Server) backup.BinlogInfo {
	t.Helper()
	ctx := context.Background()
	src := backup.Source{Datadir: filepath.Join(donor.Dir, "data"), Socket: donor.Socket,
		User: mysqltest.AgentUser, Password: mysqltest.AgentPassword}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(backup.Stream(ctx, src, donor.Dir, pw)) }()
	l := backup.Layout{Datadir: filepath.Join(target.Dir, "data")}
	bi, err := backup.Stage(ctx, l, pr)
	pr.CloseWithError(err)
	if err != nil {
		t.Fatalf("staging: %v", err)
	}
	if err := l.BeginSwap(); err != nil {
		t.Fatal(err)
	}
	target.Stop()
	if err := l.Swap(); err != nil {
		t.Fatal(err)
	}
	if l.SwapPending() {
		t.Fatal("marker still there after the swap")
	}
	if err := target.Start(); err != nil {
		t.Fatalf("starting rebuilt %s: %v", target.Name, err)
	}
	return bi
}

// TestReinitAfterPurgedBinlogs: the primary purged the binary logs a new
// member would need; an empty member cannot catch up by replication, and
// after a rebuild from a replica's backup it replicates every row.
func TestReinitAfterPurgedBinlogs(t *testing.T) {
	s := mysqltest.Start(t, 3)
	primary, replica, fresh := s[0], s[1], s[2]
	pdb, rdb, fdb := primary.RootDB(t), replica.RootDB(t), fresh.RootDB(t)
	follow(t, rdb, primary)
	exec(t, pdb, "CREATE TABLE app.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(64)) ENGINE=InnoDB")
	for range 20 {
		exec(t, pdb, "INSERT INTO app.t (v) SELECT REPEAT('x', 64) FROM mysql.seq_1_to_50")
	}
	// The replica must be past the logs, else the purge skips them.
	waitReplica(t, rdb, scalar(t, pdb, "SELECT @@gtid_binlog_pos"))
	exec(t, pdb, "FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
	// A purge skips logs the binlog checkpoint or a dump thread still
	// holds, so it is retried until only the current log is left.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var file string
		var pos int64
		var doDB, ignoreDB sql.NullString
		if err := pdb.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
			t.Fatal(err)
		}
		exec(t, pdb, "PURGE BINARY LOGS TO '"+file+"'")
		logs := countRows(t, pdb, "SHOW BINARY LOGS")
		if logs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary kept %d binary logs after the purge, want 1", logs)
		}
	}

	// Without a rebuild the empty member cannot catch up: MariaDB serves an
	// empty position from the oldest binlog left, whose events update a
	// table the member never received.
	exec(t, pdb, "INSERT INTO app.t (v) VALUES ('after the purge')")
	follow(t, fdb, primary)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if e := replicaError(t, fdb); strings.Contains(e, "Error=Error") || strings.Contains(e, "1236") || strings.Contains(e, "1146") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an empty member replicated from a purged primary: %s; slave_pos %s; tables %s; primary %s", replicaError(t, fdb), scalar(t, fdb, "SELECT @@gtid_slave_pos"), scalar(t, fdb, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='app'"), scalar(t, pdb, "SELECT @@gtid_binlog_pos"))
		}
	}
	exec(t, fdb, "STOP SLAVE", "RESET SLAVE ALL")

	bi := rebuild(t, replica, fresh)
	if bi.GTID == "" {
		t.Fatalf("backup recorded no GTID: %+v", bi)
	}
	exec(t, pdb, "INSERT INTO app.t (v) VALUES ('after the backup')")
	fdb = fresh.RootDB(t)
	exec(t, fdb, "SET GLOBAL gtid_slave_pos = '"+bi.GTID+"'")
	follow(t, fdb, primary)
	waitReplica(t, fdb, scalar(t, pdb, "SELECT @@gtid_binlog_pos"))
	pc := scalar(t, pdb, "SELECT CONCAT(COUNT(*), ':', SUM(CRC32(CONCAT(id, v)))) FROM app.t")
	fc := scalar(t, fdb, "SELECT CONCAT(COUNT(*), ':', SUM(CRC32(CONCAT(id, v)))) FROM app.t")
	if pc != fc || !strings.HasPrefix(pc, "1002:") {
		t.Fatalf("rebuilt member has %s, primary %s", fc, pc)
	}
	if id := scalar(t, fdb, "SELECT @@server_id"); id != fmt.Sprint(fresh.ServerID) {
		t.Fatalf("rebuilt member's server id is %s", id)
	}
}
