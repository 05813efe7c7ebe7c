package checker

import (
	"testing"
	"time"
)

// A switchover: writes stop at 1000 ms (a fenced at 1050), b writable at
// 1200, labelled at 1300, routed at 1600, written again at 1700; a shorter
// gap elsewhere is not the outage.
func TestOutageStepsFollowTheLongestGap(t *testing.T) {
	var s []Sample
	s = append(s, every("a", 0, 1050, Sample{Known: true, Writable: true, Labelled: true, Routed: true})...)
	s = append(s, every("a", 1050, 1300, Sample{Known: true, Labelled: true, Routed: true})...)
	s = append(s, every("a", 1300, 3000, Sample{Known: true})...)
	s = append(s, every("b", 0, 1200, Sample{Known: true})...)
	s = append(s, every("b", 1200, 1300, Sample{Known: true, Writable: true})...)
	s = append(s, every("b", 1300, 1600, Sample{Known: true, Writable: true, Labelled: true})...)
	s = append(s, every("b", 1600, 3000, Sample{Known: true, Writable: true, Labelled: true, Routed: true})...)
	writes := []Write{{1, at(100)}, {2, at(500)}, {3, at(1000)}, {4, at(1700)}, {5, at(2900)}}
	st := OutageSteps(at(0), at(3000), s, writes, "a", "b")
	want := Steps{Outage: 1200 * time.Millisecond, OldFenced: 50 * time.Millisecond, NewWritable: 200 * time.Millisecond,
		NewLabelled: 300 * time.Millisecond, NewRouted: 600 * time.Millisecond, Written: 700 * time.Millisecond}
	// The longest gap is 1700-2900 (1200 ms), after the change: nothing
	// of the change is inside it.
	if st.Outage != want.Outage || st.NewWritable != 0 {
		t.Fatalf("steps %+v: want the 1700-2900 gap, where b was already routed", st)
	}
	writes = append(writes, Write{6, at(2300)})
	st = OutageSteps(at(0), at(3000), s, writes, "a", "b")
	want.Outage = 700 * time.Millisecond
	if st != want {
		t.Fatalf("steps %+v, want %+v", st, want)
	}
	const line = "outage 700ms: old fenced +50ms (50ms); new writable +200ms (150ms); labelled +300ms (100ms); routed +600ms (300ms); written +700ms (100ms)"
	if got := st.String(); got != line {
		t.Fatalf("String() = %q, want %q", got, line)
	}
}

// Steps show in the order they happened (routed before labelled, as the
// primary routes itself first); a step not seen inside the outage (the
// new primary was writable before writes stopped) comes last, as "-", and
// each share counts from the step seen before it.
func TestOutageStepsInTheOrderTheyHappened(t *testing.T) {
	st := Steps{Outage: time.Second, OldFenced: 100 * time.Millisecond, NewRouted: 800 * time.Millisecond,
		NewLabelled: 900 * time.Millisecond, Written: 850 * time.Millisecond}
	const line = "outage 1s: old fenced +100ms (100ms); routed +800ms (700ms); written +850ms (50ms); labelled +900ms (50ms); new writable -"
	if got := st.String(); got != line {
		t.Fatalf("String() = %q, want %q", got, line)
	}
}
