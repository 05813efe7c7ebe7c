package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// Writer is an application under steady write load: one goroutine inserting
// sequential ids, as the application user, into whichever member it takes
// for the primary. It finds the primary the way a load balancer would, by
// GET /primary on every agent, keeps writing there until a write fails, and
// then looks again. While no agent answers 200 it tries the members named by
// Fallback directly (the last known primary and the switchover target), so
// that the write gap it measures is the database's, not the polling's.
//
// An id whose INSERT returned success is acknowledged; an id whose INSERT
// failed is never reused (it may or may not have committed), so the
// acknowledged ids are exactly the writes that must survive.
type Writer struct {
	c     *Cluster
	table string
	// Fallback, when set, names the members to try directly while no agent
	// answers GET /primary with 200. Set by StartWriter only.
	Fallback func() []*Member
	// onAck, when set, runs in the writer's goroutine right after each
	// acknowledgement, before the next write: for checks that must happen
	// at that instant. Set by StartWriterNotify only.
	onAck func(Ack)

	mu       sync.Mutex
	acks     []Ack
	failures int
	lastErr  error
	next     int64
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Ack is one acknowledged write.
type Ack struct {
	ID     int64
	Member string
	// At is when the INSERT returned success to the client.
	At time.Time
}

// loadTable is the Writer's table in the application database.
const loadTable = "e2e_load"

// CreateLoadTable creates the Writer's table on primary as the application
// user and waits until the live replicas have it.
func (c *Cluster) CreateLoadTable(primary *Member, skip ...*Member) {
	c.tb.Helper()
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	_, err := primary.app.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+loadTable+
		" (id BIGINT PRIMARY KEY, member VARCHAR(64) NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
	if err != nil {
		c.tb.Fatalf("creating %s on %s as the application user: %v", loadTable, primary.Name, err)
	}
	c.WriteAndReplicate(primary, "load-table-ready", skip...)
}

// StartWriter starts the load; it is stopped by Stop or at the end of the
// test. The ids start at firstID, so successive writers on one table do not
// collide. fallback (may be nil) names the members to try directly while no
// agent answers GET /primary with 200.
func (c *Cluster) StartWriter(firstID int64, fallback func() []*Member) *Writer {
	return c.StartWriterNotify(firstID, fallback, nil)
}

// StartWriterNotify is StartWriter that also calls onAck (may be nil) in
// the writer's goroutine after every acknowledged write, before the next.
func (c *Cluster) StartWriterNotify(firstID int64, fallback func() []*Member, onAck func(Ack)) *Writer {
	w := &Writer{c: c, table: loadTable, Fallback: fallback, onAck: onAck, next: firstID, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	c.tb.Cleanup(w.Stop)
	return w
}

func (w *Writer) run() {
	defer close(w.done)
	var target *Member
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		var candidates []*Member
		if target == nil {
			target = w.c.primaryByAPI()
		}
		switch {
		case target != nil:
			candidates = []*Member{target}
		case w.Fallback != nil:
			candidates = w.Fallback()
		}
		if len(candidates) == 0 {
			// Nobody to write to: a load balancer with no backend. Look again
			// shortly rather than spin on the agents' APIs.
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		for _, m := range candidates {
			if w.insert(m) {
				target = m
				break
			}
			if m == target {
				target = nil
			}
		}
	}
}

// insert writes the next id on m and reports whether it was acknowledged.
func (w *Writer) insert(m *Member) bool {
	w.mu.Lock()
	id := w.next
	w.next++
	w.mu.Unlock()
	ctx, cancel := ctxFor(time.Second)
	_, err := m.app.ExecContext(ctx, "INSERT INTO "+w.table+" (id, member) VALUES (?, ?)", id, m.Name)
	cancel()
	at := time.Now()
	w.mu.Lock()
	if err != nil {
		w.failures++
		w.lastErr = fmt.Errorf("%s: %w", m.Name, err)
		w.mu.Unlock()
		return false
	}
	a := Ack{ID: id, Member: m.Name, At: at}
	w.acks = append(w.acks, a)
	w.mu.Unlock()
	if w.onAck != nil {
		w.onAck(a)
	}
	return true
}

// primaryByAPI asks every agent's GET /primary in parallel and returns the
// one member that answers 200; nil when none does, or when two do (a load
// balancer would then have two backends; the Monitor's samples say
// whether both were writable).
func (c *Cluster) primaryByAPI() *Member {
	ok := make([]bool, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); ok[i] = m.IsPrimaryAPI() }()
	}
	wg.Wait()
	var found *Member
	for i, m := range c.Members {
		if ok[i] {
			if found != nil {
				return nil
			}
			found = m
		}
	}
	return found
}

// Stop stops the load and waits for the write in flight.
func (w *Writer) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

// NextID is the id the next write would use: the first id of a later
// writer on the same table.
func (w *Writer) NextID() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Acks returns the acknowledged writes so far, in order.
func (w *Writer) Acks() []Ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Ack(nil), w.acks...)
}

// AcksOn counts the acknowledged writes on member since since.
func (w *Writer) AcksOn(member string, since time.Time) int {
	n := 0
	for _, a := range w.Acks() {
		if a.Member == member && !a.At.Before(since) {
			n++
		}
	}
	return n
}

// Failures is the number of writes that failed, and the last error.
func (w *Writer) Failures() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failures, w.lastErr
}

// WaitAcks waits until n writes have been acknowledged by member since since.
func (w *Writer) WaitAcks(tb testing.TB, timeout time.Duration, member string, since time.Time, n int) {
	tb.Helper()
	waitFor(tb, timeout, fmt.Sprintf("%d writes acknowledged by %s", n, member), func() (bool, string) {
		f, err := w.Failures()
		got := w.AcksOn(member, since)
		return got >= n, fmt.Sprintf("%d acknowledged by %s, %d failed writes (last: %v)\n%s", got, member, f, err, w.c.describe())
	})
}

// Gap is the write unavailability of a change of primary: the time from the
// last write acknowledged by from to the first acknowledged by to.
type Gap struct {
	LastOld, FirstNew Ack
	// Interleaved lists writes acknowledged by from after to's first one:
	// with one writable primary at a time there are none.
	Interleaved []Ack
}

// Duration is the unavailability.
func (g Gap) Duration() time.Duration { return g.FirstNew.At.Sub(g.LastOld.At) }

// GapBetween finds the hand-over from member from to member to in acks.
func GapBetween(acks []Ack, from, to string) (Gap, error) {
	var g Gap
	firstNew := -1
	for i, a := range acks {
		if a.Member == to {
			firstNew = i
			g.FirstNew = a
			break
		}
	}
	if firstNew < 0 {
		return g, fmt.Errorf("no write acknowledged by %s", to)
	}
	for i := firstNew - 1; i >= 0; i-- {
		if acks[i].Member == from {
			g.LastOld = acks[i]
			break
		}
	}
	if g.LastOld.At.IsZero() {
		return g, fmt.Errorf("no write acknowledged by %s before %s's first", from, to)
	}
	for _, a := range acks[firstNew:] {
		if a.Member == from {
			g.Interleaved = append(g.Interleaved, a)
		}
	}
	return g, nil
}

// Finals reads the members' state at the end for the judge (e2e/checker):
// each one's ids in the Writer's table and @@gtid_binlog_pos, as root over
// the socket, waiting up to timeout until every member holds every ack and
// all positions agree (0: one look; a primary never gains a row it lacks
// later). primary's rows are the ones kept. A member that cannot be read
// gets no rows and its error for a position, so that the verdict fails on
// it rather than passes.
func (c *Cluster) Finals(timeout time.Duration, acks []Ack, primary *Member, replicas ...*Member) []checker.Final {
	deadline := time.Now().Add(timeout)
	for {
		var finals []checker.Final
		for i, m := range append([]*Member{primary}, replicas...) {
			finals = append(finals, readFinal(m, i == 0))
		}
		if settled(finals, acks) || !time.Now().Before(deadline) {
			return finals
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readFinal(m *Member, primary bool) checker.Final {
	f := checker.Final{Member: m.Name, Primary: primary, IDs: map[int64]bool{}}
	err := func() error {
		pos, err := m.GTIDBinlogPos()
		if err != nil {
			return err
		}
		ctx, cancel := ctxFor(10 * time.Second)
		defer cancel()
		rows, err := m.root.QueryContext(ctx, "SELECT id FROM app."+loadTable)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			f.IDs[id] = true
		}
		f.GTID = pos
		return rows.Err()
	}()
	if err != nil {
		f.IDs, f.GTID = map[int64]bool{}, fmt.Sprintf("unreadable (%v)", err)
	}
	return f
}

// settled: every member holds every ack, at one GTID position.
func settled(finals []checker.Final, acks []Ack) bool {
	for _, f := range finals {
		if f.GTID != finals[0].GTID {
			return false
		}
		for _, a := range acks {
			if !f.IDs[a.ID] {
				return false
			}
		}
	}
	return true
}

func idList(ids []int64, limit int) string {
	var s []string
	for i, id := range ids {
		if i == limit {
			s = append(s, fmt.Sprintf("... (%d more)", len(ids)-limit))
			break
		}
		s = append(s, fmt.Sprint(id))
	}
	return strings.Join(s, ", ")
}
