package salvage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

var saveNow = time.Date(2026, 12, 6, 5, 15, 0, 0, time.UTC)

// statementLogs writes two logs of statement-based transactions, which the
// real mariadb-binlog renders without a server: 0-1-1 and 0-1-2 are shared
// with the leader, 0-1-3 (a fork of the leader's 0-2-3) and 0-1-4 are not.
func statementLogs(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	a := newSynthLog(true, false)
	a.statement(g(0, 1, 1), "INSERT INTO t VALUES (1, 'shared-one')")
	a.statement(g(0, 1, 2), "INSERT INTO t VALUES (2, 'shared-two')")
	a.statement(g(0, 1, 3), "INSERT INTO t VALUES (3, 'extra-three')")
	a.rotate("mysql-bin.000002")
	b := newSynthLog(true, true)
	b.statement(g(0, 1, 4), "UPDATE t SET v = 'extra-four' WHERE id = 3")
	return []string{a.write(t, dir, "mysql-bin.000001"), b.write(t, dir, "mysql-bin.000002")}
}

func saveOptions(t *testing.T, files []string) SaveOptions {
	want, err := NotIn("0-1-2,0-2-3")
	if err != nil {
		t.Fatal(err)
	}
	return SaveOptions{
		Dir: filepath.Join(t.TempDir(), "saved"), Cluster: "demo", Member: "db1", Leader: "db2",
		Files: files, Want: want, Now: saveNow,
	}
}

func needBinlogTool(t *testing.T) {
	t.Helper()
	if _, err := findTool(""); err != nil {
		t.Skipf("needs mariadb-binlog: %v", err)
	}
}

// dirEntries lists dir; a Save that fails must leave it as it found it.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestUnitSaveWritesReplayableFile(t *testing.T) {
	needBinlogTool(t)
	o := saveOptions(t, statementLogs(t))
	s, err := Save(context.Background(), o)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	wantPath := filepath.Join(o.Dir, "mysqlha-saved-20261206T051500Z-db1.sql")
	if s.Path != wantPath || s.Count != 2 || s.GTIDs != "0-1-3..0-1-4 (2)" {
		t.Errorf("Save = %+v; want %s holding 2 transactions 0-1-3..0-1-4 (2)", s, wantPath)
	}
	if names := dirEntries(t, o.Dir); len(names) != 1 {
		t.Errorf("%s holds %q; want only the saved file", o.Dir, names)
	}
	if st, err := os.Stat(o.Dir); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("directory mode %v, %v; want 0750", st.Mode().Perm(), err)
	}
	if st, err := os.Stat(s.Path); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v, %v; want 0640", st.Mode().Perm(), err)
	}
	b, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	header, body, _ := strings.Cut(text, "\n\n")
	for _, want := range []string{
		"-- cluster:      demo", "-- member:       db1", "-- leader:       db2",
		"-- saved at:     2026-12-06T05:15:00Z", "-- transactions: 2", "-- GTIDs:        0-1-3..0-1-4 (2)",
		"mariadb < mysqlha-saved-20261206T051500Z-db1.sql",
	} {
		if !strings.Contains(header, want) {
			t.Errorf("header lacks %q:\n%s", want, header)
		}
	}
	for _, l := range strings.Split(header, "\n") {
		if !strings.HasPrefix(l, "--") {
			t.Errorf("header line %q is not an SQL comment", l)
		}
	}
	for _, want := range []string{"INSERT INTO t VALUES (3, 'extra-three')", "UPDATE t SET v = 'extra-four' WHERE id = 3", "GTID 0-1-3", "GTID 0-1-4"} {
		if !strings.Contains(body, want) {
			t.Errorf("saved file lacks %q", want)
		}
	}
	for _, unwanted := range []string{"shared-one", "shared-two", "@@session.gtid_seq_no", "@@session.server_id", "@@session.gtid_domain_id"} {
		if strings.Contains(text, unwanted) {
			t.Errorf("saved file holds %q", unwanted)
		}
	}
}

func TestUnitSaveNothingSelectedWritesNothing(t *testing.T) {
	o := saveOptions(t, statementLogs(t))
	o.Want = func(gtid.MariaDBGTID) bool { return false }
	o.Binlog = "/nonexistent/mariadb-binlog" // not needed when there is nothing to render
	s, err := Save(context.Background(), o)
	if err != nil || s != (Saved{}) {
		t.Fatalf("Save = %+v, %v; want a zero Saved and no error", s, err)
	}
	if names := dirEntries(t, o.Dir); len(names) != 0 {
		t.Errorf("%s holds %q; want nothing", o.Dir, names)
	}
}

// fakeTool writes a shell script standing in for mariadb-binlog.
func fakeTool(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-binlog")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUnitSaveFailsWritingNothing(t *testing.T) {
	corrupt := func(t *testing.T) []string {
		files := statementLogs(t)
		b, _ := os.ReadFile(files[1])
		os.WriteFile(files[1], b[:len(b)-2], 0o600)
		return files
	}
	tests := []struct {
		name     string
		files    func(*testing.T) []string
		tool     func(*testing.T) string
		sentinel error
		says     string
	}{
		{"no mariadb-binlog", statementLogs, func(*testing.T) string { return "/nonexistent/mariadb-binlog" },
			ErrNoTool, "install the MariaDB client programs"},
		{"mariadb-binlog fails", statementLogs, func(t *testing.T) string { return fakeTool(t, "echo 'ERROR: bad things' >&2; exit 3") },
			nil, "ERROR: bad things"},
		{"output this package does not know", statementLogs, func(t *testing.T) string { return fakeTool(t, "echo 'SELECT 1;'") },
			nil, "printed 0 gtid_seq_no lines for 2 transactions"},
		{"a gtid_seq_no line missing", statementLogs, func(t *testing.T) string {
			return fakeTool(t, "printf '#261206  3:32:15 server id 1  end_log_pos 298 CRC32 0x7f2f662a \\tGTID 0-1-3 trans\\n"+
				"/*M!100001 SET @@session.gtid_seq_no=3*//*!*/;\\n'")
		}, nil, "printed 1 gtid_seq_no lines for 2 transactions"},
		{"truncated log", corrupt, func(*testing.T) string { return "" }, ErrCorrupt, "mysql-bin.000002 at offset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := saveOptions(t, tc.files(t))
			o.Binlog = tc.tool(t)
			s, err := Save(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.says) || (tc.sentinel != nil && !errors.Is(err, tc.sentinel)) {
				t.Fatalf("Save = %+v, %v; want an error saying %q", s, err, tc.says)
			}
			if names := dirEntries(t, o.Dir); len(names) != 0 {
				t.Errorf("a failed Save left %q in %s", names, o.Dir)
			}
		})
	}
}

func TestUnitSaveCancelled(t *testing.T) {
	o := saveOptions(t, statementLogs(t))
	o.Binlog = fakeTool(t, "exec sleep 30")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Save(ctx, o)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("Save = %v after %v; want the context's error promptly", err, time.Since(start))
	}
	if names := dirEntries(t, o.Dir); len(names) != 0 {
		t.Errorf("a cancelled Save left %q", names)
	}
}

func TestUnitSaveNeverOverwrites(t *testing.T) {
	needBinlogTool(t)
	o := saveOptions(t, statementLogs(t))
	first, err := Save(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Save(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(o.Dir, "mysqlha-saved-20261206T051500Z-db1-2.sql"); second.Path != want {
		t.Errorf("second save at %s, want %s", second.Path, want)
	}
	if first.Path == second.Path {
		t.Error("the second save replaced the first")
	}
}

func TestUnitSaveOptionsValidate(t *testing.T) {
	_, err := Save(context.Background(), SaveOptions{Member: "db1"})
	if err == nil || !strings.Contains(err.Error(), "lacks Dir, Cluster, Leader, Files, Want") {
		t.Errorf("Save with empty options: %v", err)
	}
}

func TestUnitFileNameAndHeaderAreSafe(t *testing.T) {
	if got := fileName("db-0/../x y", saveNow.In(time.FixedZone("CET", 3600))); got != "mysqlha-saved-20261206T051500Z-db-0_.._x_y.sql" {
		t.Errorf("fileName = %q", got)
	}
	var b bytes.Buffer
	writeHeader(&b, SaveOptions{Cluster: "c", Member: "db1\nDROP DATABASE app;", Leader: "db2\r\n", Now: saveNow},
		"f.sql", Saved{Count: 1, GTIDs: "0-1-3 (1)"})
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !strings.HasPrefix(l, "--") {
			t.Errorf("header line %q is not a comment", l)
		}
	}
}

func TestUnitDropGTIDLines(t *testing.T) {
	in := `# at 328
#261206  3:32:15 server id 2  end_log_pos 370 CRC32 0xb01e490a 	GTID 0-2-1 ddl
/*M!100101 SET @@session.skip_parallel_replication=0*//*!*/;
/*M!100001 SET @@session.gtid_domain_id=0*//*!*/;
/*M!100001 SET @@session.server_id=2*//*!*/;
/*M!100001 SET @@session.gtid_seq_no=1*//*!*/;
CREATE TABLE t (id INT PRIMARY KEY, v TEXT)
/*!*/;
#261206  3:32:15 server id 2  end_log_pos 649 CRC32 0x310b96ac 	GTID 0-2-2 trans
/*M!100001 SET @@session.gtid_seq_no=2*//*!*/;
START TRANSACTION
/*!*/;
INSERT INTO t VALUES (1, '
/*M!100001 SET @@session.server_id=2*//*!*/;
')
/*!*/;
###   @2='SET @@session.gtid_seq_no=9'
COMMIT/*!*/;`
	want := `# at 328
#261206  3:32:15 server id 2  end_log_pos 370 CRC32 0xb01e490a 	GTID 0-2-1 ddl
/*M!100101 SET @@session.skip_parallel_replication=0*//*!*/;
CREATE TABLE t (id INT PRIMARY KEY, v TEXT)
/*!*/;
#261206  3:32:15 server id 2  end_log_pos 649 CRC32 0x310b96ac 	GTID 0-2-2 trans
START TRANSACTION
/*!*/;
INSERT INTO t VALUES (1, '
/*M!100001 SET @@session.server_id=2*//*!*/;
')
/*!*/;
###   @2='SET @@session.gtid_seq_no=9'
COMMIT/*!*/;`
	var out bytes.Buffer
	n, err := dropGTIDLines(strings.NewReader(in), &out)
	if err != nil || n != 2 {
		t.Errorf("dropGTIDLines counted %d gtid_seq_no lines, %v; want 2", n, err)
	}
	if out.String() != want {
		t.Errorf("dropGTIDLines output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// The test binary must not depend on a tool it did not ask for.
func TestUnitFindTool(t *testing.T) {
	if _, err := findTool("/nonexistent/x"); !errors.Is(err, ErrNoTool) || !strings.Contains(err.Error(), "/nonexistent/x") {
		t.Errorf("findTool(missing) = %v", err)
	}
	if p, err := exec.LookPath("sh"); err == nil {
		if got, err := findTool("sh"); err != nil || got != p {
			t.Errorf("findTool(sh) = %q, %v; want %q", got, err, p)
		}
	}
}
