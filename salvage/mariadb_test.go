package salvage

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// These tests run real MariaDB servers (testenv/mysqltest).

func mustExec(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func queryString(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	var s sql.NullString
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s.String
}

// rows returns "id=v" for every row of q, whose two columns are id and v.
func rows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rs, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var id int
		var v string
		if err := rs.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d=%s", id, v))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// binlogFiles lists a server's binary logs as the agent would.
func binlogFiles(t *testing.T, db *sql.DB) []string {
	t.Helper()
	base := queryString(t, db, "SELECT @@log_bin_basename")
	rs, err := db.Query("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	var names []string
	for rs.Next() {
		vals := make([]any, len(cols))
		var name string
		vals[0] = &name
		for i := 1; i < len(vals); i++ {
			vals[i] = new(sql.RawBytes)
		}
		if err := rs.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(filepath.Dir(base), n)
	}
	return paths
}

// replicate makes replica follow source from replica's @@gtid_slave_pos.
func replicate(t *testing.T, replica *sql.DB, source *mysqltest.Server) {
	t.Helper()
	mustExec(t, replica, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', "+
		"MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos", source.Host, source.Port, mysqltest.ReplUser, mysqltest.ReplPassword),
		"START SLAVE")
}

func waitForGTID(t *testing.T, replica *sql.DB, pos string) {
	t.Helper()
	var res int
	if err := replica.QueryRow("SELECT MASTER_GTID_WAIT(?, 30)", pos).Scan(&res); err != nil || res != 0 {
		st := slaveStatus(t, replica)
		t.Fatalf("replica did not reach %s within 30s (MASTER_GTID_WAIT = %d, %v): Gtid_Slave_Pos %s, "+
			"Last_IO_Error %q, Last_SQL_Error %q", pos, res, err, st["Gtid_Slave_Pos"], st["Last_IO_Error"], st["Last_SQL_Error"])
	}
}

func slaveStatus(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rs, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	out := map[string]string{}
	if !rs.Next() {
		return out
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rs.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}

// replay runs the saved file through the mariadb client, as the header says.
func replay(t *testing.T, s *mysqltest.Server, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("mariadb", "--no-defaults", "--user=root", "--socket="+s.Socket)
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb < %s: %v\n%s", path, err, out)
	}
}

func lastGTID(t *testing.T, conn *sql.Conn) gtid.MariaDBGTID {
	t.Helper()
	var s string
	if err := conn.QueryRowContext(context.Background(), "SELECT @@last_gtid").Scan(&s); err != nil {
		t.Fatal(err)
	}
	pos, err := gtid.ParseMariaDBPos(s)
	if err != nil || pos.IsEmpty() {
		t.Fatalf("@@last_gtid %q: %v", s, err)
	}
	return pos.GTIDs()[0]
}

// TestMariaDBSaveAndReplayDivergedTransactions plays an asynchronous
// failover: db1 was the primary, db2 replicated from it and was promoted
// while db1 went on committing. Save must capture exactly db1's
// transactions db2 lacks; replayed on db2 they must apply as db2's own
// transactions, so a member that keeps db1's server_id receives them.
func TestMariaDBSaveAndReplayDivergedTransactions(t *testing.T) {
	servers := mysqltest.Start(t, 2)
	old, leader := servers[0], servers[1]
	oldDB, leaderDB := old.RootDB(t), leader.RootDB(t)
	ctx := context.Background()

	// Shared history, replicated to db2.
	mustExec(t, oldDB,
		"CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64) NOT NULL)",
		"INSERT INTO app.t VALUES (1, 'shared-1'), (2, 'shared-2')")
	replicate(t, leaderDB, old)
	waitForGTID(t, leaderDB, queryString(t, oldDB, "SELECT @@gtid_binlog_pos"))
	mustExec(t, leaderDB, "STOP SLAVE", "RESET SLAVE ALL")

	// db2 is promoted and takes writes; db1 goes on alone.
	mustExec(t, leaderDB, "INSERT INTO app.t VALUES (10, 'leader-10')")
	conn, err := oldDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var extra []gtid.MariaDBGTID
	write := func(queries ...string) {
		t.Helper()
		mustExec(t, conn, queries...)
		extra = append(extra, lastGTID(t, conn))
	}
	write("INSERT INTO app.t VALUES (100, 'extra-100'), (101, 'extra-101'), (102, 'extra-102'), (103, 'extra-103'), (104, 'extra-104')")
	mustExec(t, conn, "FLUSH BINARY LOGS")
	mustExec(t, conn, "BEGIN", "UPDATE app.t SET v = CONCAT(v, '-updated') WHERE id IN (100, 101, 102)",
		"DELETE FROM app.t WHERE id = 104")
	write("COMMIT")
	write("CREATE TABLE app.extra (id INT PRIMARY KEY, v TEXT NOT NULL)")
	mustExec(t, conn, "FLUSH BINARY LOGS")
	write("INSERT INTO app.extra VALUES (1, 'two\nlines')")
	mustExec(t, conn, "SET SESSION binlog_format = STATEMENT")
	write("INSERT INTO app.t VALUES (105, 'extra-statement')")
	mustExec(t, conn, "SET SESSION binlog_format = ROW", "SET SESSION gtid_domain_id = 5")
	write("INSERT INTO app.t VALUES (200, 'extra-domain-5')")
	mustExec(t, conn, "SET SESSION gtid_domain_id = 0", "SET SESSION server_id = 7")
	write("INSERT INTO app.t VALUES (300, 'extra-server-7')")
	mustExec(t, conn, "SET SESSION server_id = 1")

	leaderState := queryString(t, leaderDB, "SELECT @@gtid_binlog_state")
	want, err := NotIn(leaderState)
	if err != nil {
		t.Fatal(err)
	}
	files := binlogFiles(t, oldDB)
	if len(files) < 3 {
		t.Fatalf("db1 has binary logs %q; the test wants its transactions spread over at least 3", files)
	}
	t.Logf("leader state %s, member state %s, files %q", leaderState,
		queryString(t, oldDB, "SELECT @@gtid_binlog_state"), files)

	dir := t.TempDir()
	saved, err := Save(ctx, SaveOptions{Dir: dir, Cluster: "salvage-test", Member: "db1", Leader: "db2",
		Files: files, Want: want, Now: time.Date(2026, 12, 6, 5, 15, 0, 0, time.UTC)})
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	if saved.Count != len(extra) || saved.GTIDs != summarize(extra) {
		t.Fatalf("Save = %+v; want the %d extra transactions %s", saved, len(extra), summarize(extra))
	}
	b, err := os.ReadFile(saved.Path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	t.Logf("saved %s (%d bytes), first lines:\n%s", saved.Path, len(b), strings.Join(strings.SplitN(text, "\n", 60)[:59], "\n"))
	for _, w := range []string{"### INSERT INTO `app`.`t`", "###   @2='extra-104'", "###   @2='extra-100-updated'",
		"### DELETE FROM `app`.`t`", "CREATE TABLE app.extra", "INSERT INTO app.t VALUES (105, 'extra-statement')",
		"-- transactions: 7", "-- GTIDs:        " + summarize(extra)} {
		if !strings.Contains(text, w) {
			t.Errorf("saved file lacks %q", w)
		}
	}
	for _, unwanted := range []string{"shared-", "leader-10", "@@session.gtid_seq_no", "@@session.server_id", "@@session.gtid_domain_id"} {
		if strings.Contains(text, unwanted) {
			t.Errorf("saved file holds %q", unwanted)
		}
	}

	// Replay on the leader, as the header says.
	leaderPos := queryString(t, leaderDB, "SELECT @@gtid_binlog_pos")
	replay(t, leader, saved.Path)
	wantRows := []string{"1=shared-1", "2=shared-2", "10=leader-10", "100=extra-100-updated", "101=extra-101-updated",
		"102=extra-102-updated", "103=extra-103", "105=extra-statement", "200=extra-domain-5", "300=extra-server-7"}
	if got := rows(t, leaderDB, "SELECT id, v FROM app.t ORDER BY id"); !slices.Equal(got, wantRows) {
		t.Errorf("after the replay db2 holds %q\nwant %q", got, wantRows)
	}
	if got := rows(t, leaderDB, "SELECT id, v FROM app.extra"); !slices.Equal(got, []string{"1=two\nlines"}) {
		t.Errorf("after the replay app.extra holds %q", got)
	}
	// Each replayed transaction is a new one of db2's: domain 0, server 2,
	// db2's next seq_nos. Nothing of server 1's, 7's or domain 5 was added.
	before, _ := gtid.ParseMariaDBPos(leaderPos)
	seq, _ := before.Seq(0)
	wantState := strings.Replace(leaderState, fmt.Sprintf("0-2-%d", seq), fmt.Sprintf("0-2-%d", seq+uint64(len(extra))), 1)
	if got := queryString(t, leaderDB, "SELECT @@gtid_binlog_state"); got != wantState {
		t.Errorf("db2's gtid_binlog_state after the replay is %s; want %s (from %s, %d new transactions of server 2)",
			got, wantState, leaderState, len(extra))
	}

	// The rebuilt member keeps server_id 1. Replicating from db2, it must
	// apply the replayed transactions, not skip them as its own.
	dir1, err := os.MkdirTemp("", "mysqltest-")
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := mysqltest.Launch(dir1, 1, mysqltest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rebuilt.Destroy)
	rebuiltDB := rebuilt.RootDB(t)
	mustExec(t, rebuiltDB, "SET SESSION sql_log_bin = 0",
		"CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64) NOT NULL)",
		"SET GLOBAL gtid_slave_pos = '"+leaderPos+"'")
	replicate(t, rebuiltDB, leader)
	waitForGTID(t, rebuiltDB, queryString(t, leaderDB, "SELECT @@gtid_binlog_pos"))
	wantRebuilt := []string{"100=extra-100-updated", "101=extra-101-updated", "102=extra-102-updated", "103=extra-103",
		"105=extra-statement", "200=extra-domain-5", "300=extra-server-7"}
	if got := rows(t, rebuiltDB, "SELECT id, v FROM app.t ORDER BY id"); !slices.Equal(got, wantRebuilt) {
		t.Errorf("the member with server_id 1 received %q from db2\nwant %q", got, wantRebuilt)
	}
}

// TestMariaDBSaveWithoutChecksums: binlog_checksum=NONE logs are read and
// the extracted log, without checksums too, renders and replays.
func TestMariaDBSaveWithoutChecksums(t *testing.T) {
	servers := mysqltest.Start(t, 2, mysqltest.Options{ExtraArgs: []string{"--binlog-checksum=NONE"}})
	src, dst := servers[0].RootDB(t), servers[1].RootDB(t)
	mustExec(t, src,
		"CREATE TABLE app.n (id INT PRIMARY KEY, v VARCHAR(64) NOT NULL)",
		"INSERT INTO app.n VALUES (1, 'one'), (2, 'two'), (3, 'three')",
		"FLUSH BINARY LOGS",
		"UPDATE app.n SET v = 'TWO' WHERE id = 2")
	files := binlogFiles(t, src)
	l, err := openLog(files[0])
	if err != nil {
		t.Fatal(err)
	}
	raw := l.fde.raw
	l.Close()
	if l.fde.checksum != checksumOff {
		t.Fatalf("%s declares checksum algorithm %d; the server runs with binlog_checksum=NONE", files[0], l.fde.checksum)
	}
	// Its checksum field is there all the same; record whether it holds a
	// CRC32 (summed with the in-use flag clear), as the extracted log's does.
	sum := append([]byte(nil), raw...)
	sum[offFlags] &^= flagInUse
	t.Logf("Format_description of a binlog_checksum=NONE log ends % x; field holds its CRC32: %v", raw[len(raw)-5:],
		crc32.ChecksumIEEE(sum[:len(sum)-checksumLen]) == binary.LittleEndian.Uint32(sum[len(sum)-checksumLen:]))

	want, err := NotIn("") // the leader has nothing: save everything
	if err != nil {
		t.Fatal(err)
	}
	saved, err := Save(context.Background(), SaveOptions{Dir: t.TempDir(), Cluster: "c", Member: "db1", Leader: "db2",
		Files: files, Want: want})
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	if saved.Count != 3 || saved.GTIDs != "0-1-1..0-1-3 (3)" {
		t.Errorf("Save = %+v; want 0-1-1..0-1-3 (3)", saved)
	}
	replay(t, servers[1], saved.Path)
	if got := rows(t, dst, "SELECT id, v FROM app.n ORDER BY id"); !slices.Equal(got, []string{"1=one", "2=TWO", "3=three"}) {
		t.Errorf("replayed rows %q", got)
	}
	if got := queryString(t, dst, "SELECT @@gtid_binlog_state"); got != "0-2-3" {
		t.Errorf("db2's gtid_binlog_state after the replay is %s; want 0-2-3", got)
	}
}

// TestMariaDBEncryptedLogIsRefused: with encrypt_binlog on, the events after
// Start_encryption cannot be read from the file, and Save says so.
func TestMariaDBEncryptedLogIsRefused(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keys, []byte("1;"+strings.Repeat("a1b2c3d4", 8)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := mysqltest.Start(t, 1, mysqltest.Options{ExtraArgs: []string{
		"--plugin-load-add=file_key_management", "--file-key-management-filename=" + keys, "--encrypt-binlog=ON"}})
	db := servers[0].RootDB(t)
	mustExec(t, db, "CREATE TABLE app.e (id INT PRIMARY KEY)", "INSERT INTO app.e VALUES (1)")
	files := binlogFiles(t, db)
	dir := t.TempDir()
	_, err := Save(context.Background(), SaveOptions{Dir: dir, Cluster: "c", Member: "db1", Leader: "db2",
		Files: files, Want: func(gtid.MariaDBGTID) bool { return true }})
	var le *LogError
	if !errors.Is(err, ErrEncrypted) || !errors.As(err, &le) || le.File != files[0] {
		t.Fatalf("Save error = %v; want ErrEncrypted naming %s", err, files[0])
	}
	t.Logf("error: %v", err)
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Errorf("a refused Save left %q", names)
	}
}
