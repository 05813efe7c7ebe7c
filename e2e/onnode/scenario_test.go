package onnode

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/fault"
)

// leader is who a scenario promises leads once the fault is healed.
type leader int

const (
	sameLeader  leader = iota // the fault must not move the lock
	otherLeader               // the lock must move away from the old primary
	anyLeader                 // either, as long as the invariants hold
)

func (l leader) String() string {
	return [...]string{"the same primary", "another member", "any member"}[l]
}

// scenario is one fault, what it promises, and how long it lasts.
type scenario struct {
	name string
	// inject puts the fault in place and returns. One that prepares
	// first (an errant write, a long statement) sets trial.at when the
	// fault proper begins.
	inject func(tr *trial) error
	leader leader
	// hold: the fault stays this long after injection (and, for
	// otherLeader, at least until the new primary is routed) before the
	// runner heals it.
	hold   time.Duration
	expect checker.Expect
	// repair runs after healing, before the cluster must be healthy again
	// (the errant replica is rebuilt).
	repair func(tr *trial) error
	// verify checks what the scenario itself promises beyond the
	// checker's rules, after the cluster is healthy again.
	verify func(tr *trial, newPrimary corev1.Pod) error
	// trials, when set, overrides -onnode.trials (a fault that lasts
	// minutes runs once).
	trials int
	// selfHealing: a member the fault leaves diverged heals by itself
	// (rebuild_diverged=auto); the runner waits for it instead of
	// rebuilding it.
	selfHealing bool
	// target is the client's longest outage the fault should stay under
	// in its worst trial (docs/fault-scenarios.md). It is reported,
	// met or missed, not enforced: expect.MaxOutage is what fails a trial.
	target time.Duration
}

// trial is one injection.
type trial struct {
	c        *cluster
	faults   *fault.Injector
	clients  *clients
	w        *writer // clients.w
	primary  corev1.Pod
	replicas []corev1.Pod
	at       time.Time
	// changedTo is the member the lock moved to (otherLeader scenarios).
	changedTo string
	// errs collects failures of helpers running beside the fault, notes
	// what they saw.
	mu          sync.Mutex
	errs, notes []string
}

func (tr *trial) fail(format string, args ...any) {
	tr.mu.Lock()
	tr.errs = append(tr.errs, fmt.Sprintf(format, args...))
	tr.mu.Unlock()
}

func (tr *trial) problems() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.errs)
}

func (tr *trial) notesLine() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(append([]string{""}, tr.notes...), "; ")
}

// note adds a line to the trial's log line.
func (tr *trial) note(format string, args ...any) {
	tr.mu.Lock()
	tr.notes = append(tr.notes, fmt.Sprintf(format, args...))
	tr.mu.Unlock()
}

// result is one trial's measurements and verdict.
type result struct {
	ph      phases
	changed bool
	report  checker.Report
	books   books
	// rebuilt counts members rebuilt because they were left errant.
	rebuilt int
	// steps: where the client's longest outage went, when the primary
	// changed (as change says: "old -> new").
	steps  *checker.Steps
	change string
	// healthy is the time from the fault to a healthy cluster again: three
	// Ready pods (the replicas streaming within maximum_lag_for_reads),
	// one primary, routed; the fault's own duration (hold) included.
	healthy time.Duration
}

// healTimeout is how long the cluster has to become healthy after the
// fault is healed: less when an errant old primary is an expected outcome
// (it never heals by itself).
func healTimeout(sc scenario) time.Duration {
	if sc.expect.MayLose > 0 && !sc.selfHealing {
		return 90 * time.Second
	}
	return 4 * time.Minute
}

// settleErrant waits until agentctl status shows every member leading or
// streaming, twice in a row, and returns a member it shows errant meanwhile.
func settleErrant(c *cluster, timeout time.Duration) (string, bool) {
	settled := 0
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline) && settled < 2; time.Sleep(time.Second) {
		if name, ok := errantMember(c); ok {
			return name, true
		}
		states, err := memberStates(c)
		settled++
		for _, name := range members {
			if s := states[name]; err != nil || (s != "running" && s != "streaming") {
				settled = 0
			}
		}
	}
	return "", false
}

// errantMember is a member that agentctl status shows errant.
func errantMember(c *cluster) (string, bool) {
	states, err := memberStates(c)
	if err != nil {
		return "", false
	}
	for _, name := range members {
		if states[name] == "errant" {
			return name, true
		}
	}
	return "", false
}

// run runs sc's trials on the shared cluster, each under the checker:
// a client writing through the primary Service and the monitor. Every
// violation fails the test; the per-scenario report is printed for
// make bench-failover.
func (sc scenario) run(t *testing.T) {
	c := deployed(t)
	var results []result
	trials := *flagTrials
	if sc.trials > 0 {
		trials = sc.trials
	}
	for i := 1; i <= trials; i++ {
		r := sc.trial(t, c, i)
		results = append(results, r)
	}
	printReport(t, sc, results)
}

func (sc scenario) trial(t *testing.T, c *cluster, n int) result {
	ctx := context.Background()
	old := c.waitHealthy(4 * time.Minute)
	if err := c.awaitCaughtUp(3 * time.Minute); err != nil {
		msg := fmt.Sprintf("%s trial %d: %v", sc.name, n, err)
		c.dump(ctx, msg)
		t.Fatal(msg)
	}
	tr := &trial{c: c, faults: &fault.Injector{}, primary: old}
	for _, p := range c.pods(ctx) {
		if p.Name != old.Name {
			tr.replicas = append(tr.replicas, p)
		}
	}
	defer func() {
		if err := tr.faults.HealAll(); err != nil {
			t.Errorf("trial %d: %v", n, err)
		}
	}()
	tr.clients = c.startClients(sc.expect.MayLose == 0)
	defer tr.clients.stop()
	w := tr.clients.w
	tr.w = w
	m := c.startMonitor()
	from := time.Now()
	time.Sleep(time.Second)

	tr.at = time.Now()
	if err := sc.inject(tr); err != nil {
		w.Stop()
		m.Stop()
		t.Fatalf("%s trial %d: injecting the fault: %v", sc.name, n, err)
	}
	var r result
	if sc.leader == otherLeader || sc.leader == anyLeader {
		// A move that anyLeader allows is measured while the fault holds.
		wait := max(sc.hold, 90*time.Second)
		if sc.leader == anyLeader {
			wait = cmp.Or(sc.hold, 45*time.Second)
		}
		name, ph, err := c.awaitChange(ctx, old.Name, tr.at, wait, sc.leader == otherLeader)
		if err != nil {
			msg := fmt.Sprintf("%s trial %d: %v %v", sc.name, n, err, tr.problems())
			c.dump(ctx, msg)
			if sc.repair != nil {
				// Leave the cluster repaired for the scenarios that follow.
				tr.faults.HealAll()
				sc.repair(tr)
			}
			t.Fatal(msg)
		}
		r.ph, r.changed, tr.changedTo = ph, name != "", name
	}
	time.Sleep(time.Until(tr.at.Add(sc.hold)))
	if err := tr.faults.HealAll(); err != nil {
		t.Fatalf("%s trial %d: healing: %v", sc.name, n, err)
	}
	if sc.repair != nil {
		if err := sc.repair(tr); err != nil {
			t.Fatalf("%s trial %d: repair: %v", sc.name, n, err)
		}
	}
	now, err := c.awaitHealthy(healTimeout(sc))
	if sc.expect.MayLose > 0 && !sc.selfHealing {
		// The old primary may hold the writes it took with it, as errant
		// transactions: its agent refuses to replicate and says so, and
		// the operator rebuilds it. So does the test (tr.recreate), and
		// counts it. The pods can look healthy before the old primary's
		// agent has compared its GTIDs (its readiness probe still passing
		// from before the fault), so the members' states decide.
		if name, ok := settleErrant(c, 30*time.Second); ok {
			tr.note("%s errant after the fault (it kept writes no replica had received)", name)
			r.rebuilt++
			if err = tr.recreate(name); err == nil {
				now, err = c.awaitHealthy(4 * time.Minute)
			}
		}
	}
	if err != nil {
		// The cluster did not heal: still count what was lost, for the
		// failure message.
		w.Stop()
		until := time.Now()
		rep := checker.Analyze(from, until, m.Stop(), w.writes(), c.finals(ctx, w.writes(), 10*time.Second))
		rep.JudgeRouting(from, until, m.Views())
		msg := fmt.Sprintf("%s trial %d: %v\n  at that point: %d acknowledged, %d missing from the member labelled primary, "+
			"replicas missing %v, instants with two writable %d, two routable %d",
			sc.name, n, err, rep.Acked, len(rep.Lost), rep.Missing, rep.DualWritable, rep.DualRoutable)
		c.dump(ctx, msg)
		t.Fatal(msg)
	}
	r.healthy = time.Since(tr.at)
	// Some writes through the healed cluster, then the books are closed.
	for since := time.Now(); w.firstAckAfter(since).IsZero() && time.Since(since) < 30*time.Second; {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	to := time.Now()
	tr.clients.stop()
	writes := w.writes()
	samples := m.Stop()
	finals := c.finals(ctx, writes, 2*time.Minute)
	r.report = checker.Analyze(from, to, samples, writes, finals)
	r.report.JudgeRouting(from, to, m.Views())
	if now.Name != old.Name {
		st := checker.OutageSteps(from, to, samples, writes, old.Name, now.Name)
		r.steps, r.change = &st, old.Name+" -> "+now.Name
	}
	if r.report.DualRoutable > 0 {
		t.Logf("%s trial %d: the routing, change by change, from the monitor's start:\n  %s", sc.name, n, strings.Join(m.Routing(), "\n  "))
	}
	r.books = c.judgeBooks(ctx, tr.clients)

	var problems []string
	switch {
	case sc.leader == sameLeader && now.Name != old.Name:
		problems = append(problems, fmt.Sprintf("the primary moved from %s to %s; the scenario promises %s", old.Name, now.Name, sc.leader))
	case sc.leader == otherLeader && now.Name == old.Name && tr.changedTo == "":
		problems = append(problems, fmt.Sprintf("%s still leads; the scenario promises %s", old.Name, sc.leader))
	}
	if sc.verify != nil {
		if err := sc.verify(tr, now); err != nil {
			problems = append(problems, err.Error())
		}
	}
	problems = append(problems, r.report.Violations(sc.expect)...)
	problems = append(problems, r.books.violations(sc.expect)...)
	problems = append(problems, tr.problems()...)
	t.Logf("verdict: %s trial %d: %s -> %s; detect %s promote %s route %s; healthy again %s; %d acked, %d lost, longest outage %s; "+
		"max writable %d routable %d labelled %d over %d instants; writable while unreachable %s; GTIDs converged %v; %s%s",
		sc.name, n, old.Name, now.Name, opt(r.changed, r.ph.detect), opt(r.changed, r.ph.promote), opt(r.changed, r.ph.route),
		ms(r.healthy), r.report.Acked, len(r.report.Lost), ms(r.report.LongestOutage), r.report.MaxWritable, r.report.MaxRoutable,
		r.report.MaxLabelled, r.report.Ticks, ms(time.Duration(r.report.IsolatedWritable)*checker.Tick), r.report.GTIDConverged,
		r.books, tr.notesLine())
	if len(problems) > 0 {
		msg := fmt.Sprintf("%s trial %d broke its promises:\n  %s", sc.name, n, strings.Join(problems, "\n  "))
		c.dump(ctx, msg)
		t.Error(msg)
	}
	return r
}

func opt(ok bool, d time.Duration) string {
	if !ok {
		return "-"
	}
	return ms(d)
}

// finals reads every member's rows and GTID position through its socket,
// waiting up to timeout for the replicas to hold every acknowledged write
// and all positions to agree; what it returns then is the verdict's.
func (c *cluster) finals(ctx context.Context, writes []checker.Write, timeout time.Duration) []checker.Final {
	deadline := time.Now().Add(timeout)
	for {
		var out []checker.Final
		settled := true
		for _, name := range members {
			f, err := c.final(ctx, name)
			if err != nil {
				settled = false
				continue
			}
			out = append(out, f)
		}
		if settled && converged(out, writes) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// awaitCaughtUp waits until every member's GTID position is the same, so
// that a trial starts from caught-up replicas: a member rebuilt by the last
// trial is Ready as soon as it streams, while it may still be replaying the
// binary logs (its lag then keeps it from being a switchover target). Then
// it waits two loops, for the agents' records to say so too.
func (c *cluster) awaitCaughtUp(timeout time.Duration) error {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		var gtids []string
		for _, name := range members {
			if f, err := c.final(ctx, name); err == nil {
				gtids = append(gtids, f.GTID)
			}
		}
		if len(gtids) == len(members) && len(slices.Compact(slices.Clone(gtids))) == 1 {
			time.Sleep(2 * time.Second)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the members' GTID positions did not converge within %s: %v", timeout, gtids)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func converged(finals []checker.Final, writes []checker.Write) bool {
	for _, f := range finals {
		if f.GTID != finals[0].GTID {
			return false
		}
		for _, w := range writes {
			if !f.IDs[w.ID] {
				return false
			}
		}
	}
	return true
}

func (c *cluster) final(ctx context.Context, name string) (checker.Final, error) {
	p, err := c.views().pods.Get(name)
	if err != nil {
		return checker.Final{}, err
	}
	var sock socketConn
	defer sock.close()
	if known, _ := sock.writable(p); !known {
		return checker.Final{}, fmt.Errorf("%s does not answer", name)
	}
	f := checker.Final{Member: name, Primary: p.Labels[roleLabel] == "primary", IDs: map[int64]bool{}}
	if err := sock.db.QueryRowContext(ctx, "SELECT @@global.gtid_binlog_pos").Scan(&f.GTID); err != nil {
		return f, err
	}
	rows, err := sock.db.QueryContext(ctx, "SELECT id FROM app.w")
	if err != nil {
		return f, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return f, err
		}
		f.IDs[id] = true
	}
	return f, rows.Err()
}

// printReport prints the scenario's figures, as make bench-failover shows
// them: seconds from the injection, over the trials where the lock moved.
func printReport(t *testing.T, sc scenario, results []result) {
	var detect, promote, route, outage, healthy []time.Duration
	var lost, maxW, maxR, dualW, dualR, rebuilt int
	var transfers, transfersLost, wrongBooks, ops int
	verdicts := map[string]int{}
	for _, r := range results {
		rebuilt += r.rebuilt
		b := r.books.bank
		transfers, transfersLost, wrongBooks = transfers+b.Acked, transfersLost+len(b.Lost), wrongBooks+len(b.Wrong)
		if reg := r.books.register; reg != nil {
			ops += reg.Ops
			verdicts[string(reg.Verdict)]++
		}
		if r.changed {
			detect, promote, route = append(detect, r.ph.detect), append(promote, r.ph.promote), append(route, r.ph.route)
		}
		outage, healthy = append(outage, r.report.LongestOutage), append(healthy, r.healthy)
		lost += len(r.report.Lost)
		maxW, maxR = max(maxW, r.report.MaxWritable), max(maxR, r.report.MaxRoutable)
		dualW, dualR = dualW+r.report.DualWritable, dualR+r.report.DualRoutable
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: %d trials, the lock moved in %d\n", sc.name, len(results), len(detect))
	fmt.Fprintf(&b, "  %-4s %8s %8s %8s %8s %8s\n", "", "detect", "promote", "route", "outage", "healthy")
	for _, row := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p95", 0.95}, {"max", 1}} {
		fmt.Fprintf(&b, "  %-4s %8s %8s %8s %8s %8s\n", row.name, pct(detect, row.p), pct(promote, row.p), pct(route, row.p),
			pct(outage, row.p), pct(healthy, row.p))
	}
	if sc.target > 0 && len(outage) > 0 {
		worst := slices.Max(outage)
		verdict := "met"
		if worst > sc.target {
			verdict = "missed"
		}
		fmt.Fprintf(&b, "  client's longest outage, worst trial %.3fs: target <= %gs %s\n", worst.Seconds(), sc.target.Seconds(), verdict)
	}
	for i, r := range results {
		if r.steps != nil {
			fmt.Fprintf(&b, "  trial %d, %s: %s\n", i+1, r.change, r.steps)
		}
	}
	fmt.Fprintf(&b, "  writes lost %d; most writable at once %d, most routable at once %d; instants with two writable %d, two routable %d; errant members rebuilt %d\n",
		lost, maxW, maxR, dualW, dualR, rebuilt)
	fmt.Fprintf(&b, "  bank: %d transfers acknowledged, %d lost, %d wrong books; register: %d operations, linearizable %v\n",
		transfers, transfersLost, wrongBooks, ops, verdicts)
	t.Log("\n" + b.String())
	if *flagReport != "" {
		f, err := os.OpenFile(*flagReport, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = f.WriteString(b.String())
			f.Close()
		}
		if err != nil {
			t.Errorf("writing the report: %v", err)
		}
	}
}

// pct is the p-quantile in seconds, "-" for none.
func pct(s []time.Duration, p float64) string {
	if len(s) == 0 {
		return "-"
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return fmt.Sprintf("%.3f", s[min(len(s)-1, max(0, int(float64(len(s))*p+0.5)-1))].Seconds())
}

// netns is the path of pod's network namespace.
func (tr *trial) netns(pod corev1.Pod) (string, error) {
	return tr.c.node.PodNetns(context.Background(), namespace, pod.Name)
}

// isolate cuts pod off from everything until the trial heals.
func (tr *trial) isolate(pod corev1.Pod) error {
	ns, err := tr.netns(pod)
	if err != nil {
		return err
	}
	_, err = tr.faults.Isolate(ns)
	return err
}

// pid is the host PID of a container's main process in pod.
func (tr *trial) pid(pod corev1.Pod, container string) (int, error) {
	return tr.c.node.ContainerPID(context.Background(), namespace, pod.Name, container)
}

// killContainer is kill -9 of a container's main process in pod.
func (tr *trial) killContainer(pod corev1.Pod, container string) error {
	pid, err := tr.pid(pod, container)
	if err != nil {
		return err
	}
	return fault.Kill(pid)
}

func wantPrimary(now corev1.Pod, name string) error {
	if now.Name != name {
		return fmt.Errorf("%s leads, want %s", now.Name, name)
	}
	return nil
}

// asyncLossAllowance: in async mode a primary that dies without handing
// over may take with it the writes it acknowledged in its last moment,
// before a replica received them (docs/fault-scenarios.md, "What can be lost"). The checker
// counts them exactly; this bounds what the scenarios tolerate.
const asyncLossAllowance = 20

// recreate rebuilds an errant member by wiping it (wipeMember): the new pod
// starts empty and replicates the primary's whole history. Not agentctl
// reinit, which an operator would use (reseed_after_purge_test.go proves
// it): a rebuilt member's binary log begins at its backup, and once it
// leads, every member a later test wipes could no longer catch up (CI saw
// it: error 1236).
func (tr *trial) recreate(member string) error {
	err := tr.c.wipeMember(context.Background(), member)
	if err == nil {
		tr.note("%s rebuilt: its pod and its volume's data deleted", member)
	}
	return err
}
