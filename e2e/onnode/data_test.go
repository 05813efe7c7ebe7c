package onnode

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"testing"
	"time"
)

var flagDataMB = flag.Int("onnode.data-mb", 0,
	"load the database to this many MB before the rebuild scenarios (the re-seeds, the diverged old primary), to time a rebuild against its size (make bench-failover: 1024)")

// ballastChunk is the rows one INSERT adds: 10,000 of 1 KB, about 10 MB, so
// that no transaction is large enough to stall replication for long.
const ballastChunk = 10000

// ensureData grows the primary's database to at least -onnode.data-mb MB
// (app.ballast: rows of 1 KB of random bytes, which nothing compresses),
// waits until every member has it, and returns the database's size in MB,
// as the trials' notes report it.
func (c *cluster) ensureData(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	primary := c.waitHealthy(3 * time.Minute)
	db, err := c.rootDB(ctx, primary.Name, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := dataMB(t, db)
	if size >= *flagDataMB {
		return size
	}
	began := time.Now()
	create := "CREATE TABLE IF NOT EXISTS app.ballast (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1024) NOT NULL) ENGINE=InnoDB"
	if _, err := db.ExecContext(ctx, create); err != nil {
		t.Fatalf("creating app.ballast on %s: %v", primary.Name, err)
	}
	insert := fmt.Sprintf("INSERT INTO app.ballast (pad) SELECT RANDOM_BYTES(1000) FROM app.seq_1_to_%d", ballastChunk)
	for size < *flagDataMB {
		if _, err := db.ExecContext(ctx, insert); err != nil {
			t.Fatalf("loading app.ballast on %s: %v", primary.Name, err)
		}
		size = dataMB(t, db)
	}
	if err := c.awaitCaughtUp(15 * time.Minute); err != nil {
		t.Fatalf("the replicas after loading %d MB: %v", size, err)
	}
	t.Logf("loaded the database to %d MB in %s", size, ms(time.Since(began)))
	return size
}

// rootDB is a root pool on member's mysqld, through its socket from the
// host, with timeout for each statement.
func (c *cluster) rootDB(ctx context.Context, member string, timeout time.Duration) (*sql.DB, error) {
	pid, err := c.node.ContainerPID(ctx, namespace, member, "mariadb")
	if err != nil {
		return nil, err
	}
	return openSocket(pid, timeout), nil
}

// dataMB is the size of the InnoDB data and indexes of every schema but the
// system ones, in MB, as the server's statistics count them.
func dataMB(t *testing.T, db *sql.DB) int {
	t.Helper()
	var mb int
	err := db.QueryRowContext(context.Background(), "SELECT CAST(COALESCE(SUM(data_length+index_length),0) DIV 1048576 AS UNSIGNED) "+
		"FROM information_schema.TABLES WHERE table_schema NOT IN ('mysql','information_schema','performance_schema','sys')").Scan(&mb)
	if err != nil {
		t.Fatalf("measuring the database: %v", err)
	}
	return mb
}
