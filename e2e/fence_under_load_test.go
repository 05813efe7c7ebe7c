package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// kill -9 of the primary's agent while a client holds a long write on its
// mysqld, which stays up, and while an application writes to it: the split
// brain reproduced by hand, ten times over on one cluster. A statement such
// as UPDATE ... SLEEP(8) makes SET GLOBAL read_only=ON wait behind it; the
// new leader must not promote while the old source is still writable, so
// its fence kills the sessions in its way. At the instant the new primary
// acknowledges its first write, the old source is read-only; never are two
// servers writable; every write either primary acknowledged is on the final
// primary; and the old primary, its agent restarted, follows without an
// errant transaction. Each trial kills the agent of the then primary.
func TestFenceUnderLoad(t *testing.T) {
	const trials = 10
	c := NewCluster(t, Options{})
	rep := NewInjections(t, "fence_under_load")
	primary := c.Bootstrap()
	c.CreateLoadTable(primary)
	createLongWriteTable(t, c, primary)
	sb := c.StartMonitor()
	rep.Watch(sb)

	watch := &firstAckWatch{}
	w := c.StartWriterNotify(1, nil, watch.onAck)
	w.WaitAcks(t, 10*time.Second, primary.Name, time.Time{}, 20)

	var acked, killed int // long UPDATEs acknowledged, and killed
	for n := 1; n <= trials; n++ {
		r := fenceTrial(t, c, w, watch, primary, n)
		rep.Trial()
		rep.Outage(r.gap)
		if r.updateErr == nil {
			acked++
		} else {
			killed++
		}
		primary = r.newPrimary
	}

	w.Stop()
	acks := w.Acks()
	finals := c.Finals(30*time.Second, acks, primary, c.Others(primary)...)
	// Every acknowledged long UPDATE added one to v; one that failed may
	// have committed or not.
	var v int
	if err := primary.root.QueryRow("SELECT v FROM app." + longWriteTable + " WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v < acked || v > trials {
		t.Errorf("%s: v = %d after %d acknowledged and %d failed long UPDATEs: an acknowledged one is lost", primary.Name, v, acked, killed)
	}
	t.Logf("%d acknowledged writes, %d long UPDATEs killed by the fence, %d completed; v = %d", len(acks), killed, acked, v)
	c.ExpectSameGTIDs(primary, "fence-under-load-end")
	rep.AckedLost(len(sb.Judge(acks, finals, checker.Expect{}).Lost))
	sb.ExpectAlive()
}

// longWriteTable holds the row the long UPDATE holds.
const longWriteTable = "e2e_long"

// longUpdate holds row 1 for 8 s, as the client in the reproduction did;
// "+ 1" makes an acknowledged one visible on the new primary.
const longUpdate = "UPDATE " + longWriteTable + " SET v = v + 1 + SLEEP(8) WHERE id = 1"

func createLongWriteTable(t *testing.T, c *Cluster, primary *Member) {
	t.Helper()
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	for _, q := range []string{
		"CREATE TABLE " + longWriteTable + " (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO " + longWriteTable + " VALUES (1, 0)",
	} {
		if _, err := primary.app.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %s: %v", primary.Name, q, err)
		}
	}
	c.WriteAndReplicate(primary, "long-write-table-ready")
}

// openLongSession is an application session to s that waits for slow
// statements: the harness's pool gives up reading after 2 s, which would
// end the long UPDATE on the client side whatever the server does.
func openLongSession(t *testing.T, s *mysqltest.Server) *sql.Conn {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = mysqltest.AppUser, mysqltest.AppPassword, "tcp", s.Addr(), mysqltest.AppDatabase
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 30*time.Second, 30*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	sc, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("%s: opening an application session: %v", s.Name, err)
	}
	return sc
}

// firstAckWatch catches, in the writer's goroutine, the first write a
// member other than the old primary acknowledges after the kill, and reads
// the old primary's read_only right then, before the next write.
type firstAckWatch struct {
	mu    sync.Mutex
	old   *Member
	after time.Time
	first *Ack
	// oldRO and oldErr are the old primary's read_only at first.
	oldRO  bool
	oldErr error
	read   bool
}

func (f *firstAckWatch) arm(old *Member, after time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.old, f.after, f.first, f.oldRO, f.oldErr, f.read = old, after, nil, false, nil, false
}

func (f *firstAckWatch) onAck(a Ack) {
	f.mu.Lock()
	old := f.old
	if old == nil || f.first != nil || a.Member == old.Name || a.At.Before(f.after) {
		f.mu.Unlock()
		return
	}
	f.first = &a
	f.mu.Unlock()
	ro, err := old.ReadOnly()
	f.mu.Lock()
	f.oldRO, f.oldErr, f.read = ro, err, true
	f.mu.Unlock()
}

// result returns the first acknowledgement once the old primary's
// read_only has been read after it.
func (f *firstAckWatch) result() (first *Ack, oldRO bool, oldErr error, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first, f.oldRO, f.oldErr, f.read
}

type fenceTrialResult struct {
	newPrimary *Member
	// gap is the write unavailability: from the last acknowledgement
	// before the new primary's first to that first.
	gap       time.Duration
	updateErr error
}

func fenceTrial(t *testing.T, c *Cluster, w *Writer, watch *firstAckWatch, old *Member, n int) fenceTrialResult {
	t.Helper()
	// The long write, as the application user on the primary.
	session := openLongSession(t, old.Server)
	defer session.Close()
	type outcome struct {
		err  error
		took time.Duration
	}
	updated := make(chan outcome, 1)
	began := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := session.ExecContext(ctx, longUpdate)
		updated <- outcome{err, time.Since(began)}
	}()
	waitFor(t, 5*time.Second, "the long UPDATE to run on "+old.Name, func() (bool, string) {
		var k int
		err := old.root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", longUpdate).Scan(&k)
		return err == nil && k > 0, fmt.Sprintf("running: %d (err %v)", k, err)
	})

	killed := time.Now()
	watch.arm(old, killed)
	old.KillAgent()
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	var first *Ack
	waitFor(t, limit, fmt.Sprintf("trial %d: another member to acknowledge a write after %s's agent was killed", n, old.Name), func() (bool, string) {
		f, ro, err, ok := watch.result()
		if !ok {
			fails, last := w.Failures()
			return false, fmt.Sprintf("%d failed writes (last: %v)\n%s", fails, last, c.describe())
		}
		first = f
		if err != nil || !ro {
			t.Errorf("trial %d: when %s acknowledged its first write, the old primary %s had read_only=%v (err %v): two writable primaries",
				n, f.Member, old.Name, ro, err)
		}
		return true, ""
	})
	newPrimary := c.Member(first.Member)
	if !newPrimary.IsPrimaryAPI() {
		t.Errorf("trial %d: %s took writes but GET /primary does not answer 200: %s", n, newPrimary.Name, newPrimary.Status())
	}
	if h, err := c.LeaderHolder(); err != nil || h != newPrimary.Name {
		t.Errorf("trial %d: %s took writes but the leader key names %q (err %v)", n, newPrimary.Name, h, err)
	}

	// The write gap, and no write taken by the old primary after the new
	// one's first.
	r := fenceTrialResult{newPrimary: newPrimary}
	var prev Ack
	for _, a := range w.Acks() {
		switch {
		case a.ID < first.ID:
			prev = a
		case a.ID > first.ID && a.Member == old.Name:
			t.Errorf("trial %d: the old primary %s acknowledged write %d at %s, after %s's first (%d at %s)",
				n, old.Name, a.ID, stamp(a.At), newPrimary.Name, first.ID, stamp(first.At))
		}
	}
	r.gap = first.At.Sub(prev.At)

	// The long UPDATE ends: killed by the fence, or run to completion
	// (then acknowledged, and it must be on the new primary).
	select {
	case o := <-updated:
		r.updateErr = o.err
		how := "acknowledged"
		if o.err != nil {
			how = "failed: " + o.err.Error()
		}
		t.Logf("trial %d: %s -> %s: first write %v after the kill, write gap %v; long UPDATE ended after %v, %s",
			n, old.Name, newPrimary.Name, ms(first.At.Sub(killed)), ms(r.gap), ms(o.took), how)
	case <-time.After(15 * time.Second):
		t.Fatalf("trial %d: the long UPDATE on %s did not end within 15 s of the kill", n, old.Name)
	}
	acks := w.Acks()
	c.JudgeWrites(fmt.Sprintf("trial %d: the failover to %s", n, newPrimary.Name), acks, c.Finals(0, acks, newPrimary))
	if !old.MustReadOnly(t) {
		t.Errorf("trial %d: the old primary %s is writable after the failover", n, old.Name)
	}

	// The old primary's agent comes back and follows.
	old.StartAgent()
	c.WaitRejoined(30*time.Second, old, newPrimary)
	watch.arm(nil, time.Time{})
	return r
}
