package backup_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// BenchmarkReinit1GB measures a whole rebuild of an empty member from a
// donor holding about 1 GB of InnoDB data: stream, extract, prepare, stop,
// swap, start. Run it with: go test ./backup -run '^$' -bench Reinit1GB
// -benchtime 1x (loading the data takes a minute or two first).
func BenchmarkReinit1GB(b *testing.B) {
	s := mysqltest.Start(b, 2, mysqltest.Options{ExtraArgs: []string{"--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"}})
	donor, target := s[0], s[1]
	db := donor.RootDB(b)
	exec(b, db, "CREATE TABLE app.big (id INT PRIMARY KEY, pad VARCHAR(1000)) ENGINE=InnoDB")
	// 1,000,000 rows of about 1 KB, in statements of 100,000 rows.
	const rows = 1_000_000
	start := time.Now()
	for i := 0; i < rows; i += 100_000 {
		exec(b, db, fmt.Sprintf("INSERT INTO app.big SELECT seq, REPEAT(MD5(seq), 31) FROM mysql.seq_%d_to_%d", i+1, i+100_000))
	}
	exec(b, db, "ANALYZE TABLE app.big")
	var size int64
	if err := db.QueryRow("SELECT data_length + index_length FROM information_schema.tables WHERE table_schema = 'app' AND table_name = 'big'").Scan(&size); err != nil {
		b.Fatal(err)
	}
	datadir := dirSize(filepath.Join(donor.Dir, "data"))
	b.Logf("loaded %d rows, %.2f GB of InnoDB table data (datadir %.2f GB with binlogs and redo log) in %v",
		rows, float64(size)/1e9, float64(datadir)/1e9, time.Since(start).Round(time.Second))
	b.ResetTimer()
	var last time.Duration
	for range b.N {
		t0 := time.Now()
		rebuild(b, donor, target)
		last = time.Since(t0)
	}
	b.StopTimer()
	if got := scalar(b, target.RootDB(b), "SELECT COUNT(*) FROM app.big"); got != fmt.Sprint(rows) {
		b.Fatalf("rebuilt member has %s rows, want %d", got, rows)
	}
	b.ReportMetric(float64(size)/1e6/last.Seconds(), "MB/s")
	fmt.Printf("reinit of %.2f GB of table data took %v (%.0f MB/s): stream, extract, prepare, stop, swap, start\n",
		float64(size)/1e9, last.Round(10*time.Millisecond), float64(size)/1e6/last.Seconds())
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
