package onnode

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
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
	size := c.dataMB(t, primary.Name)
	if size >= *flagDataMB {
		return size
	}
	began := time.Now()
	create := "CREATE TABLE IF NOT EXISTS app.ballast (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1024) NOT NULL) ENGINE=InnoDB"
	if out, err := c.execSQL(ctx, primary.Name, create); err != nil {
		t.Fatalf("creating app.ballast: %v\n%s", err, out)
	}
	insert := fmt.Sprintf("INSERT INTO app.ballast (pad) SELECT RANDOM_BYTES(1000) FROM seq_1_to_%d", ballastChunk)
	for size < *flagDataMB {
		for range 10 {
			if out, err := c.execSQL(ctx, primary.Name, insert); err != nil {
				t.Fatalf("loading app.ballast: %v\n%s", err, out)
			}
		}
		size = c.dataMB(t, primary.Name)
	}
	if err := c.awaitCaughtUp(15 * time.Minute); err != nil {
		t.Fatalf("the replicas after loading %d MB: %v", size, err)
	}
	t.Logf("loaded the database to %d MB in %s", size, ms(time.Since(began)))
	return size
}

// dataMB is the size of member's InnoDB data and indexes, all schemas but
// the system ones, in MB.
func (c *cluster) dataMB(t *testing.T, member string) int {
	t.Helper()
	out, err := c.execSQL(context.Background(), member, "SELECT CAST(COALESCE(SUM(data_length+index_length),0) DIV 1048576 AS UNSIGNED) AS mb "+
		"FROM information_schema.TABLES WHERE table_schema NOT IN ('mysql','information_schema','performance_schema','sys')")
	if err != nil {
		t.Fatalf("measuring the database on %s: %v\n%s", member, err, out)
	}
	f := strings.Fields(out) // "mb" then the number
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatalf("measuring the database on %s: %q", member, out)
	}
	return n
}
