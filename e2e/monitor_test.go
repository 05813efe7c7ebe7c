package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// Monitor records every member's writability for the one judge,
// e2e/checker: when it stops, the checker judges its samples (Stop), or
// its samples with the writes the client got acknowledged and the members'
// final rows (Judge), and every broken promise fails the test. The
// application user lacks READ_ONLY ADMIN, so @@read_only=0 is exactly "an
// application write would succeed".
//
// Each member has its own prober, which reads @@read_only about every
// 10 ms and never cancels a read: a hung (SIGSTOPped) server blocks its
// prober alone, without stalling the others and without piling up
// connections that would all land at once when it resumes. Each read is one
// checker.Sample with Asked (sent) and At (answered): the checker counts a
// member writable only between two writable answers, so a hand-over
// between two reads is not taken for a split brain, and a server that does
// not answer is not counted (it cannot acknowledge a write either).
type Monitor struct {
	c *Cluster
	// members are the cluster's and any extra servers the scenario runs.
	members  []*Member
	interval time.Duration
	started  time.Time
	stop     chan struct{}
	once     sync.Once

	mu      sync.Mutex
	stopped time.Time
	samples []checker.Sample
	report  checker.Report
}

// WritableEvent is a change of a member's writability as the monitor saw it.
type WritableEvent struct {
	Member   string
	At       time.Time
	Writable bool
}

// StartMonitor starts sampling the cluster's members and the extra servers
// (ones outside the cluster that must never take a write either, such as an
// impostor's); the samples are judged by Stop, by Judge, or at the end of
// the test.
func (c *Cluster) StartMonitor(extra ...*Member) *Monitor {
	k := &Monitor{c: c, interval: 20 * time.Millisecond, started: time.Now(), stop: make(chan struct{}),
		members: append(append([]*Member(nil), c.Members...), extra...)}
	// The probers are not waited for: one may be blocked on a hung server
	// until it resumes, and it ends by itself then.
	for _, m := range k.members {
		go k.probe(m)
	}
	c.tb.Cleanup(func() { k.Stop() })
	return k
}

// probe reads m's @@read_only every interval/2 until the monitor stops.
func (k *Monitor) probe(m *Member) {
	t := time.NewTicker(k.interval / 2)
	defer t.Stop()
	for {
		asked := time.Now()
		var ro int
		err := m.root.QueryRowContext(context.Background(), "SELECT @@global.read_only").Scan(&ro)
		// Reachable is the checker's "answered from outside the pod"; on
		// loopback the monitor's socket is the only way in.
		s := checker.Sample{Asked: asked, At: time.Now(), Member: m.Name, Known: err == nil, Writable: err == nil && ro == 0,
			Reachable: err == nil}
		k.mu.Lock()
		if k.stopped.IsZero() {
			k.samples = append(k.samples, s)
		}
		k.mu.Unlock()
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
	}
}

// Stop ends sampling and judges the samples alone (two writable members at
// any instant), unless Judge did; it returns the verdict's report.
func (k *Monitor) Stop() checker.Report {
	return k.Judge(nil, nil, checker.Expect{NoFinals: true})
}

// Judge ends sampling and judges the samples with acks (the writes
// acknowledged while it ran) and finals (the members' state at the end,
// from Cluster.Finals) against e. Only the first of Stop and Judge judges;
// later calls return its report.
func (k *Monitor) Judge(acks []Ack, finals []checker.Final, e checker.Expect) checker.Report {
	k.once.Do(func() {
		close(k.stop)
		k.mu.Lock()
		k.stopped = time.Now()
		samples := slices.Clone(k.samples)
		k.mu.Unlock()
		r := k.c.judge("the monitored window", k.started, k.stopped, samples, acks, finals, e)
		k.mu.Lock()
		k.report = r
		k.mu.Unlock()
	})
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.report
}

// JudgeWrites judges acks against finals alone, for a scenario that checks
// acknowledged writes at a moment of its own (after each failover, say):
// none may be lost.
func (c *Cluster) JudgeWrites(what string, acks []Ack, finals []checker.Final) checker.Report {
	from, to := time.Now(), time.Now()
	if len(acks) > 0 {
		from, to = acks[0].At, acks[len(acks)-1].At
	}
	return c.judge(what, from, to, nil, acks, finals, checker.Expect{})
}

// judge hands a recording to e2e/checker and fails the test with every
// violation, the members' final state and the writability timeline.
func (c *Cluster) judge(what string, from, to time.Time, samples []checker.Sample, acks []Ack, finals []checker.Final,
	e checker.Expect) checker.Report {
	r := checker.Analyze(from, to, samples, checkerWrites(acks), finals)
	v := r.Violations(e)
	c.tb.Logf("verdict: %s: %d acknowledged writes, %d lost; %d instants judged, %d with two writable", what, r.Acked,
		len(r.Lost), r.Ticks, r.DualWritable)
	if len(v) == 0 {
		return r
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s to %s) broke its promises, judged by e2e/checker:\n  %s\n", what, stamp(from), stamp(to),
		strings.Join(v, "\n  "))
	for _, f := range finals {
		if f.Primary && len(r.Lost) > 0 {
			fmt.Fprintf(&b, "the final primary %s lacks %d of %d acknowledged writes: ids %s\n", f.Member, len(r.Lost), len(acks),
				idList(r.Lost, 20))
		}
	}
	if len(samples) > 0 {
		fmt.Fprintf(&b, "%d instants judged, %d with two writable; writability timeline seen by the monitor:\n%s",
			r.Ticks, r.DualWritable, timeline(events(samples)))
	}
	c.tb.Error(b.String())
	return r
}

// Samples is how many reads were recorded so far, all members together.
func (k *Monitor) Samples() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.samples)
}

// Events returns the writability changes seen so far.
func (k *Monitor) Events() []WritableEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return events(k.samples)
}

// Timeline renders the writability changes, for logs.
func (k *Monitor) Timeline() string { return timeline(k.Events()) }

// events lists, per member and in time order, its first answer and every
// answer whose writability differs from the one before.
func events(samples []checker.Sample) []WritableEvent {
	ss := slices.Clone(samples)
	slices.SortStableFunc(ss, func(a, b checker.Sample) int { return a.At.Compare(b.At) })
	var out []WritableEvent
	last := map[string]bool{}
	for _, s := range ss {
		w := s.Known && s.Writable
		if was, seen := last[s.Member]; !seen || was != w {
			out = append(out, WritableEvent{Member: s.Member, At: s.At, Writable: w})
			last[s.Member] = w
		}
	}
	return out
}

func timeline(evs []WritableEvent) string {
	var b strings.Builder
	for _, e := range evs {
		state := "read-only or down"
		if e.Writable {
			state = "WRITABLE"
		}
		fmt.Fprintf(&b, "  %s %s %s\n", stamp(e.At), e.Member, state)
	}
	return b.String()
}

// ExpectAlive fails the test unless the monitor kept sampling since it
// started (all members together, at least a third of one read per member
// every 20 ms, a sixth of the nominal rate, to allow for a loaded machine
// and a hung member), so a stalled monitor cannot pass a scenario
// vacuously.
func (k *Monitor) ExpectAlive() {
	k.mu.Lock()
	end, reads := k.stopped, len(k.samples)
	k.mu.Unlock()
	if end.IsZero() {
		end = time.Now()
	}
	ran := end.Sub(k.started)
	if want := max(len(k.members)*int(ran/k.interval)/3, 3); reads < want {
		k.c.tb.Errorf("the monitor took only %d reads in %v (want >= %d): its verdict is not evidence",
			reads, ran.Round(time.Millisecond), want)
	}
}

// checkerWrites is acks as the judge takes them.
func checkerWrites(acks []Ack) []checker.Write {
	writes := make([]checker.Write, len(acks))
	for i, a := range acks {
		writes[i] = checker.Write{ID: a.ID, At: a.At}
	}
	return writes
}

// failures is a testing.TB that keeps what the judge reports instead of
// failing the test, for the harness's own test.
type failures struct {
	testing.TB
	mu  sync.Mutex
	got []string
}

func (f *failures) Error(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, fmt.Sprint(args...))
}

func (f *failures) Errorf(format string, args ...any) { f.Error(fmt.Sprintf(format, args...)) }

// The recording and the judge see what they are for: a replica made
// writable by hand for 300 ms, its agent frozen so that it does not undo
// that, next to the primary, is two writable members, reported with the
// timeline; an acknowledged row deleted from the primary alone is a lost
// write.
func TestJudgeReportsWhatBreaks(t *testing.T) {
	c := NewCluster(t, Options{})
	primary := c.Bootstrap()
	replica := c.Others(primary)[0]
	rec := &failures{TB: t}
	k := (&Cluster{tb: rec, Members: c.Members}).StartMonitor()
	replica.FreezeAgent()
	defer replica.ThawAgent()
	time.Sleep(200 * time.Millisecond)
	if _, err := replica.root.Exec("SET GLOBAL read_only = 0"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := replica.root.Exec("SET GLOBAL read_only = 1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	r := k.Stop()
	k.ExpectAlive()
	got := strings.Join(rec.got, "\n")
	if r.DualWritable == 0 || !strings.Contains(got, "two writable members") ||
		!strings.Contains(got, replica.Name+" WRITABLE") || !strings.Contains(got, primary.Name+" WRITABLE") {
		t.Fatalf("%d instants with two writable; the judge reported:\n%s", r.DualWritable, got)
	}
	t.Logf("%d of %d instants with two writable; the judge reported:\n%s", r.DualWritable, r.Ticks, got)

	replica.ThawAgent()
	c.CreateLoadTable(primary)
	w := c.StartWriter(1, nil)
	w.WaitAcks(t, 10*time.Second, primary.Name, time.Time{}, 20)
	w.Stop()
	acks := w.Acks()
	gone := acks[len(acks)/2].ID
	// Off the binary log: the replicas keep the row and the GTIDs agree, so
	// the primary's loss is the only violation.
	ctx, cancel := ctxFor(5 * time.Second)
	defer cancel()
	conn, err := primary.root.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM app."+loadTable+" WHERE id = ?", gone); err != nil {
		t.Fatal(err)
	}
	rec.got = nil
	r = (&Cluster{tb: rec}).JudgeWrites("the load", acks, c.Finals(time.Second, acks, primary, c.Others(primary)...))
	got = strings.Join(rec.got, "\n")
	if len(r.Lost) != 1 || r.Lost[0] != gone || !strings.Contains(got, "1 acknowledged writes lost") ||
		!strings.Contains(got, fmt.Sprintf("the final primary %s lacks 1 of %d acknowledged writes: ids %d", primary.Name, len(acks), gone)) {
		t.Fatalf("lost %v (deleted %d); the judge reported:\n%s", r.Lost, gone, got)
	}
	t.Logf("the judge reported:\n%s", got)
}
