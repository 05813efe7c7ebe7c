package checker

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// every returns samples of member every 50 ms over [fromMs, toMs).
func every(member string, fromMs, toMs int, s Sample) []Sample {
	var out []Sample
	for ms := fromMs; ms < toMs; ms += 50 {
		x := s
		x.At, x.Member = at(ms), member
		out = append(out, x)
	}
	return out
}

func ids(n ...int64) map[int64]bool {
	m := map[int64]bool{}
	for _, id := range n {
		m[id] = true
	}
	return m
}

func TestCleanFailoverHasNoViolation(t *testing.T) {
	var s []Sample
	s = append(s, every("a", 0, 1000, Sample{Known: true, Writable: true, Reachable: true, Labelled: true, Routed: true})...)
	s = append(s, every("a", 1000, 3000, Sample{Known: true, Reachable: true})...)
	s = append(s, every("b", 0, 1200, Sample{Known: true, Reachable: true})...)
	s = append(s, every("b", 1200, 3000, Sample{Known: true, Writable: true, Reachable: true, Labelled: true, Routed: true})...)
	writes := []Write{{1, at(100)}, {2, at(900)}, {3, at(1500)}, {4, at(2900)}}
	finals := []Final{{"a", false, ids(1, 2, 3, 4), "0-1-4"}, {"b", true, ids(1, 2, 3, 4), "0-1-4"}}
	r := Analyze(at(0), at(3000), s, writes, finals)
	if v := r.Violations(Expect{MaxOutage: 2 * time.Second}); len(v) > 0 {
		t.Fatalf("violations %v in %+v", v, r)
	}
	if r.MaxWritable != 1 || r.MaxRoutable != 1 || r.LongestOutage != 1400*time.Millisecond || r.IsolatedWritable != 0 {
		t.Fatalf("report %+v", r)
	}
}

// The checker must see what it is for: an overlap of two writable members,
// two routed ones, a lost write, a lagging replica, diverged GTIDs and a
// long outage each make a violation.
func TestEveryViolationIsReported(t *testing.T) {
	var s []Sample
	s = append(s, every("a", 0, 2000, Sample{Known: true, Writable: true, Routed: true})...)
	s = append(s, every("b", 1000, 2000, Sample{Known: true, Writable: true, Routed: true})...)
	writes := []Write{{1, at(100)}, {2, at(200)}}
	finals := []Final{{"a", false, ids(), "0-1-1"}, {"b", true, ids(1), "0-2-5"}}
	r := Analyze(at(0), at(2000), s, writes, finals)
	v := strings.Join(r.Violations(Expect{MaxOutage: time.Second}), "\n")
	for _, want := range []string{"two writable", "two routable", "1 acknowledged writes lost", "replica a lacks 1",
		"did not converge", "longest write outage 1.8s"} {
		if !strings.Contains(v, want) {
			t.Errorf("violations lack %q:\n%s", want, v)
		}
	}
	if r.IsolatedWritable != 62 { // 41 instants of a (0 to 2000 ms), 21 of b (1000 to 2000), all unreachable
		t.Errorf("isolated writable %d, want 62", r.IsolatedWritable)
	}
	if r.DualWritable != 21 || !strings.Contains(r.FirstDual, "+1s") {
		t.Errorf("dual writable %d first %q, want 21 (1000..2000 ms) from +1s", r.DualWritable, r.FirstDual)
	}
}

// A member whose last sample is old (its monitor probe hangs) is not
// counted at all: neither as writable nor as not.
func TestStaleSamplesSayNothing(t *testing.T) {
	s := every("a", 0, 100, Sample{Known: true, Writable: true})
	s = append(s, every("b", 0, 3000, Sample{Known: true, Writable: true})...)
	r := Analyze(at(0), at(3000), s, nil, nil)
	if r.DualWritable > 12 {
		t.Fatalf("a stale sample counted for %d instants", r.DualWritable)
	}
}

func TestMayLoseAllowsAsyncLoss(t *testing.T) {
	writes := []Write{{1, at(0)}, {2, at(10)}}
	r := Analyze(at(0), at(20), nil, writes, []Final{{"b", true, ids(1), "x"}})
	if v := r.Violations(Expect{MayLose: 1}); len(v) > 0 {
		t.Fatalf("one loss allowed, got %v", v)
	}
	if v := r.Violations(Expect{}); len(v) != 1 {
		t.Fatalf("no loss allowed, got %v", v)
	}
}

// reads returns member's reads every step ms over [fromMs, toMs), each sent
// at ms and answered 1 ms later, as a recorder that knows Asked makes them.
func reads(member string, fromMs, toMs, step int, writable bool) []Sample {
	var out []Sample
	for ms := fromMs; ms < toMs; ms += step {
		out = append(out, Sample{Asked: at(ms), At: at(ms + 1), Member: member, Known: true, Writable: writable, Reachable: true})
	}
	return out
}

// a is fenced at 45 ms and b promoted at 46, between reads: at the instant
// 50 both latest answers say writable, but a's next read says read-only.
// Without Asked that is a split brain; with it, none.
func TestHandOverBetweenReadsIsNoSplitBrain(t *testing.T) {
	var s []Sample
	s = append(s, reads("a", 0, 41, 10, true)...)    // answers at 1 .. 41
	s = append(s, reads("a", 55, 200, 10, false)...) // 56 ..
	s = append(s, reads("b", 7, 38, 10, false)...)   // 8 .. 38
	s = append(s, reads("b", 47, 200, 10, true)...)  // 48 ..
	if r := Analyze(at(0), at(200), s, nil, nil); r.DualWritable != 0 {
		t.Fatalf("hand-over between reads judged a split brain: %+v", r)
	}
	var bare []Sample
	for _, x := range s {
		x.Asked = time.Time{}
		bare = append(bare, x)
	}
	if r := Analyze(at(0), at(200), bare, nil, nil); r.DualWritable == 0 {
		t.Fatalf("without Asked the latest answers at 50 ms are both writable; want that counted: %+v", r)
	}
}

// Two members confirmed writable together for 20 ms, between two ticks,
// are a split brain: the judge stops at every answer, not only every Tick.
func TestConfirmedOverlapBetweenTicksIsSplitBrain(t *testing.T) {
	var s []Sample
	s = append(s, reads("a", 0, 1025, 10, true)...)
	s = append(s, reads("a", 1030, 1500, 10, false)...)
	s = append(s, reads("b", 5, 1005, 10, false)...)
	s = append(s, reads("b", 1005, 1500, 10, true)...)
	r := Analyze(at(0), at(1500), s, nil, nil)
	v := r.Violations(Expect{NoFinals: true})
	if r.DualWritable == 0 || len(v) != 1 || !strings.Contains(v[0], "two writable") || !strings.Contains(r.FirstDual, "writable [a b]") {
		t.Fatalf("overlap 1006..1020 ms: dual %d first %q violations %v", r.DualWritable, r.FirstDual, v)
	}
}

// A read sent and not answered for seconds (a SIGSTOPped server) is no
// evidence of writability, even if it finally answers writable.
func TestUnansweredReadSaysNothing(t *testing.T) {
	s := reads("a", 0, 1000, 10, true)
	s = append(s, Sample{Asked: at(1000), At: at(3000), Member: "a", Known: true, Writable: true})
	s = append(s, reads("b", 1500, 3000, 10, true)...)
	if r := Analyze(at(0), at(3000), s, nil, nil); r.DualWritable != 0 {
		t.Fatalf("a hung member counted as writable: %+v", r)
	}
}

// NoFinals judges samples and writes alone; without it, missing finals are
// a violation.
func TestNoFinals(t *testing.T) {
	r := Analyze(at(0), at(100), nil, nil, nil)
	if v := r.Violations(Expect{NoFinals: true}); len(v) != 0 {
		t.Fatalf("NoFinals: %v", v)
	}
	if v := r.Violations(Expect{}); len(v) != 1 || !strings.Contains(v[0], "did not converge") {
		t.Fatalf("no finals read: %v", v)
	}
}

// Routing comes from a watch cache read one member at a time: two routed
// members seen only between two Ticks (at answers of samples with Asked)
// are that skew, not two routes; at a Tick they are a violation.
func TestRoutingIsJudgedAtTicks(t *testing.T) {
	routed := func(m string, askedMs, atMs int, on bool) Sample {
		return Sample{Member: m, Asked: at(askedMs), At: at(atMs), Known: true, Reachable: true, Routed: on}
	}
	between := []Sample{routed("a", 0, 1, true), routed("a", 49, 60, false), routed("b", 20, 55, true), routed("b", 70, 80, true)}
	if r := Analyze(at(0), at(100), between, nil, nil); r.DualRoutable != 0 {
		t.Errorf("two routed between Ticks counted %d times (%s)", r.DualRoutable, r.FirstDual)
	}
	atTick := []Sample{routed("a", 0, 1, true), routed("a", 60, 70, false), routed("b", 20, 30, true), routed("b", 70, 80, true)}
	if r := Analyze(at(0), at(100), atTick, nil, nil); r.DualRoutable != 1 {
		t.Errorf("two routed at the 50 ms Tick counted %d times, want 1", r.DualRoutable)
	}
}
