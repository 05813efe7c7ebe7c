package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// SplitBrainChecker samples every member's mysqld about every 20 ms and
// records a violation whenever two of them would take an application write
// at the same instant. The application user lacks READ_ONLY ADMIN, so
// @@read_only=0 is exactly "an application write would succeed".
//
// Each member has its own prober, which reads @@read_only in a loop and
// never cancels a read: a hung (SIGSTOPped) server blocks its prober alone,
// without stalling the others and without piling up connections that would
// all land at once when it resumes. A member counts as writable at a sample
// when its last answer said so and no read has been outstanding for longer
// than hungAfter since: a server that does not answer cannot acknowledge a
// write either.
//
// Answers from different members come from slightly different instants:
// one server fenced, then another unfenced, both between two reads, is legal
// and would look like a violation. A suspect sample is therefore confirmed by
// reading A, then B, then A again, one after the other: A writable before
// and after B's read means both were writable at the instant B answered (A
// does not go read-only and back within milliseconds). The confirmation also
// runs a rolled-back application write on both, for the report.
type SplitBrainChecker struct {
	c *Cluster
	// members are the cluster's and any extra servers the scenario runs.
	members  []*Member
	interval time.Duration
	started  time.Time
	stopped  time.Time
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	// KnownBug names a reported agent bug that this scenario reproduces:
	// violations are then reported through knownBug.
	KnownBug string

	mu         sync.Mutex
	answers    map[string]answer
	samples    int
	reads      int // answers from the probers, all members together
	violations []string
	last       map[string]bool
	events     []WritableEvent
}

type answer struct {
	writable bool
	// asking is when the outstanding read was sent; zero between reads.
	asking time.Time
}

// hungAfter is how long a read may be outstanding before the server counts
// as hung; reads take a few milliseconds even on a loaded machine.
const hungAfter = 250 * time.Millisecond

// WritableEvent is a change of a member's writability as the checker saw it.
type WritableEvent struct {
	Member   string
	At       time.Time
	Writable bool
}

// StartSplitBrainChecker starts sampling the cluster's members and the
// extra servers (ones outside the cluster that must never take a write
// either, such as an impostor's); the checker is stopped, and its violations
// reported as test errors, by Stop or at the end of the test.
func (c *Cluster) StartSplitBrainChecker(extra ...*Member) *SplitBrainChecker {
	k := &SplitBrainChecker{c: c, interval: 20 * time.Millisecond, started: time.Now(), stop: make(chan struct{}),
		done: make(chan struct{}), answers: map[string]answer{}, last: map[string]bool{},
		members: append(append([]*Member(nil), c.Members...), extra...)}
	// The probers are not waited for: one may be blocked on a hung server
	// until it resumes, and it ends by itself then.
	for _, m := range k.members {
		go k.probe(m)
	}
	go func() {
		defer close(k.done)
		k.run()
	}()
	c.tb.Cleanup(k.Stop)
	return k
}

// probe reads m's @@read_only every interval until the checker stops.
func (k *SplitBrainChecker) probe(m *Member) {
	t := time.NewTicker(k.interval / 2)
	defer t.Stop()
	for {
		k.mu.Lock()
		a := k.answers[m.Name]
		a.asking = time.Now()
		k.answers[m.Name] = a
		k.mu.Unlock()
		var ro int
		err := m.root.QueryRowContext(context.Background(), "SELECT @@global.read_only").Scan(&ro)
		k.mu.Lock()
		k.answers[m.Name] = answer{writable: err == nil && ro == 0}
		k.reads++
		k.mu.Unlock()
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
	}
}

func (k *SplitBrainChecker) run() {
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		k.sample()
	}
}

// writable reads m's @@read_only now, for confirmations.
func writable(m *Member) bool {
	ctx, cancel := ctxFor(200 * time.Millisecond)
	defer cancel()
	var ro int
	err := m.root.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro)
	return err == nil && ro == 0
}

func (k *SplitBrainChecker) sample() {
	now := time.Now()
	var suspects []*Member
	k.mu.Lock()
	k.samples++
	for _, m := range k.members {
		a := k.answers[m.Name]
		w := a.writable && (a.asking.IsZero() || now.Sub(a.asking) < hungAfter)
		if k.last[m.Name] != w || k.samples == 1 {
			k.events = append(k.events, WritableEvent{Member: m.Name, At: now, Writable: w})
			k.last[m.Name] = w
		}
		if w {
			suspects = append(suspects, m)
		}
	}
	k.mu.Unlock()
	if len(suspects) < 2 {
		return
	}
	a, b := suspects[0], suspects[1]
	if !writable(a) || !writable(b) || !writable(a) {
		return
	}
	at := time.Now()
	msg := fmt.Sprintf("SPLIT BRAIN at %s: %s and %s both writable (read_only=0 on %s, then %s, then %s again); "+
		"application write probe: %s: %v, %s: %v", stamp(at), a.Name, b.Name, a.Name, b.Name, a.Name,
		a.Name, probeResult(a), b.Name, probeResult(b))
	k.mu.Lock()
	if len(k.violations) < 20 {
		k.violations = append(k.violations, msg)
	}
	k.mu.Unlock()
}

func probeResult(m *Member) string {
	if err := m.WriteProbe(); err != nil {
		return "refused (" + err.Error() + ")"
	}
	return "ACCEPTED"
}

// Stop ends sampling and reports every violation as a test error.
func (k *SplitBrainChecker) Stop() {
	k.once.Do(func() {
		close(k.stop)
		<-k.done
		k.mu.Lock()
		defer k.mu.Unlock()
		k.stopped = time.Now()
		if len(k.violations) == 0 {
			return
		}
		report := strings.Join(k.violations, "\n") + "\nwritability timeline seen by the split-brain checker:\n" + k.timelineLocked()
		if k.KnownBug != "" {
			knownBug(k.c.tb, k.KnownBug, "%s", report)
			return
		}
		k.c.tb.Error(report)
	})
}

// Samples is how many samples were taken so far.
func (k *SplitBrainChecker) Samples() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.samples
}

// Violations returns the confirmed split-brain instants so far.
func (k *SplitBrainChecker) Violations() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.violations...)
}

// Events returns the writability changes seen so far.
func (k *SplitBrainChecker) Events() []WritableEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]WritableEvent(nil), k.events...)
}

// Timeline renders the writability changes, for logs.
func (k *SplitBrainChecker) Timeline() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.timelineLocked()
}

func (k *SplitBrainChecker) timelineLocked() string {
	var b strings.Builder
	for _, e := range k.events {
		state := "read-only or down"
		if e.Writable {
			state = "WRITABLE"
		}
		fmt.Fprintf(&b, "  %s %s %s\n", stamp(e.At), e.Member, state)
	}
	return b.String()
}

// ExpectAlive fails the test unless the checker kept sampling since it
// started (at least a third of the nominal rate, to allow for a loaded
// machine), so a stalled checker cannot pass a scenario vacuously.
func (k *SplitBrainChecker) ExpectAlive() {
	k.mu.Lock()
	end, samples, reads := k.stopped, k.samples, k.reads
	k.mu.Unlock()
	if end.IsZero() {
		end = time.Now()
	}
	ran := end.Sub(k.started)
	// Nominally one sample, and two reads per member, every interval.
	if want := max(int(ran/k.interval)/3, 3); samples < want || reads < want {
		k.c.tb.Errorf("split-brain checker took only %d samples from %d reads in %v (want >= %d of each): "+
			"its verdict is not evidence", samples, reads, ran.Round(time.Millisecond), want)
	}
}
