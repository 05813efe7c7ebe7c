package backup

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestParseBinlogInfo(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    BinlogInfo
		wantErr string
	}{
		{in: "mysql-bin.000003\t385\t0-1-22\n", want: BinlogInfo{File: "mysql-bin.000003", Pos: 385, GTID: "0-1-22"}},
		{in: "mysql-bin.000001\t4\t0-1-5,1-2-7", want: BinlogInfo{File: "mysql-bin.000001", Pos: 4, GTID: "0-1-5,1-2-7"}},
		{in: "mysql-bin.000001\t329\n", want: BinlogInfo{File: "mysql-bin.000001", Pos: 329}},
		{in: "", wantErr: "want file"},
		{in: "mysql-bin.000001\tx\t0-1-5", wantErr: "position"},
		{in: "mysql-bin.000001\t4\t3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", wantErr: "domain-server-sequence"},
		{in: "a\t1\t0-1-2\textra", wantErr: "want file"},
	} {
		got, err := ParseBinlogInfo(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseBinlogInfo(%q) = %+v, %v; want error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseBinlogInfo(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestPlanSwap(t *testing.T) {
	l := Layout{Datadir: "/d"}
	ops, err := PlanSwap(l, phaseStaged,
		[]string{"ibdata1", "mysql", MarkerFile, ServerIDFile, stagingDir, oldDir, SavedPrefix + "20261206T050000Z-db1.sql"},
		[]string{"ibdata1", "app", preparedFile, ServerIDFile, "xtrabackup_binlog_info", SavedPrefix + "20261201T000000Z-db2.sql"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, o.String())
	}
	want := []string{
		"rename /d/ibdata1 -> /d/.mysqlha-reinit-old/ibdata1",
		"rename /d/mysql -> /d/.mysqlha-reinit-old/mysql",
		"phase moved-out",
		"rename /d/.mysqlha-reinit-staging/ibdata1 -> /d/ibdata1",
		"rename /d/.mysqlha-reinit-staging/app -> /d/app",
		"rename /d/.mysqlha-reinit-staging/xtrabackup_binlog_info -> /d/xtrabackup_binlog_info",
		"remove /d/.mysqlha-reinit-staging",
		"remove /d/.mysqlha-reinit-old",
		"remove /d/.mysqlha-reinit",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := PlanSwap(l, "bogus", nil, nil); err == nil {
		t.Fatal("an unknown phase was planned")
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel+"="+string(b))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// TestSwapResumes: a swap interrupted after any number of its steps (a
// crash) and run again ends with the same data directory as one that ran
// straight through.
func TestSwapResumes(t *testing.T) {
	setup := func(t *testing.T) Layout {
		l := Layout{Datadir: t.TempDir()}
		write(t, filepath.Join(l.Datadir, "ibdata1"), "old")
		write(t, filepath.Join(l.Datadir, "mysql/user.frm"), "old")
		write(t, filepath.Join(l.Datadir, ServerIDFile), "7")
		write(t, filepath.Join(l.Staging(), "ibdata1"), "new")
		write(t, filepath.Join(l.Staging(), "app/t.ibd"), "new")
		write(t, filepath.Join(l.Staging(), ServerIDFile), "1")
		write(t, filepath.Join(l.Staging(), preparedFile), "ok")
		return l
	}
	want := []string{"app/t.ibd=new", "ibdata1=new", ServerIDFile + "=7"}
	l := setup(t)
	before := tree(t, l.Datadir)
	if err := l.Swap(); err != nil || !reflect.DeepEqual(tree(t, l.Datadir), before) {
		t.Fatalf("a swap without a marker changed something: %v %v", err, tree(t, l.Datadir))
	}
	full, _ := PlanSwap(Layout{Datadir: "/d"}, phaseStaged, []string{"ibdata1", "mysql", ServerIDFile, stagingDir}, []string{"ibdata1", "app", ServerIDFile, preparedFile})
	for crashAfter := range len(full) {
		t.Run(full[crashAfter].String(), func(t *testing.T) {
			l := setup(t)
			if err := l.BeginSwap(); err != nil {
				t.Fatal(err)
			}
			for _, o := range full[:crashAfter] {
				o.From = strings.Replace(o.From, "/d", l.Datadir, 1)
				o.To = strings.Replace(o.To, "/d", l.Datadir, 1)
				var err error
				switch o.Kind {
				case "rename":
					os.MkdirAll(filepath.Dir(o.To), 0o750)
					err = os.Rename(o.From, o.To)
				case "remove":
					err = os.RemoveAll(o.From)
				case "phase":
					err = writeFileSync(l.Marker(), []byte(o.Phase))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Swap(); err != nil {
				t.Fatal(err)
			}
			if got := tree(t, l.Datadir); !reflect.DeepEqual(got, want) {
				t.Fatalf("after resuming: %v, want %v", got, want)
			}
			if l.SwapPending() {
				t.Fatal("marker left behind")
			}
		})
	}
}

func TestFreshStagingDiscardsUnprepared(t *testing.T) {
	l := Layout{Datadir: t.TempDir()}
	write(t, filepath.Join(l.Staging(), "half-written.ibd"), "x")
	if err := l.BeginSwap(); err == nil {
		t.Fatal("an unprepared staging was swapped in")
	}
	dir, err := l.FreshStaging()
	if err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("staging kept %d entries", len(es))
	}
}
