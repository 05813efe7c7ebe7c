package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Steps is where the client's longest outage went when the primary
// changed: each step's time from the last acknowledged write before the
// outage, as the monitor's samples show it (to a Tick's precision). A
// zero step was not seen inside the outage.
type Steps struct {
	Outage time.Duration
	// OldFenced: the old primary's mysqld answered read-only or stopped
	// answering. NewWritable, NewLabelled, NewRouted: the new primary's
	// mysqld answered writable; its pod carried the primary label; its
	// address was a ready endpoint of the primary Service. Written: the
	// first acknowledged write after the outage.
	OldFenced, NewWritable, NewLabelled, NewRouted, Written time.Duration
}

// OutageSteps breaks the longest outage in [from, to] down into the steps of
// a change of primary from old to new. Samples are in time order per member.
func OutageSteps(from, to time.Time, samples []Sample, writes []Write, old, new string) Steps {
	start, end := longestGap(from, to, writes)
	st := Steps{Outage: end.Sub(start), Written: end.Sub(start)}
	// first is when ok began to hold of member inside the outage: 0 when
	// it held already as the outage began, or never did.
	first := func(member string, ok func(Sample) bool) time.Duration {
		held := false
		for _, s := range samples {
			switch {
			case s.Member != member || s.At.After(end):
			case !s.At.After(start):
				held = ok(s)
			case held:
				return 0
			case ok(s):
				return s.At.Sub(start)
			}
		}
		return 0
	}
	st.OldFenced = first(old, func(s Sample) bool { return !s.Known || !s.Writable })
	st.NewWritable = first(new, func(s Sample) bool { return s.Known && s.Writable })
	st.NewLabelled = first(new, func(s Sample) bool { return s.Labelled })
	st.NewRouted = first(new, func(s Sample) bool { return s.Routed })
	return st
}

// String is the steps on one line in the order they happened, each with
// its share: the time since the step before it; the steps not seen come
// last, as "-".
func (st Steps) String() string {
	type step struct {
		name string
		at   time.Duration
	}
	steps := []step{{"old fenced", st.OldFenced}, {"new writable", st.NewWritable}, {"labelled", st.NewLabelled},
		{"routed", st.NewRouted}, {"written", st.Written}}
	// In time order, the steps not seen (0) last.
	key := func(s step) time.Duration {
		if s.at == 0 {
			return math.MaxInt64
		}
		return s.at
	}
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(key(a), key(b)) })
	var b strings.Builder
	fmt.Fprintf(&b, "outage %s:", st.Outage.Round(time.Millisecond))
	prev := time.Duration(0)
	for _, step := range steps {
		if step.at == 0 {
			fmt.Fprintf(&b, " %s -;", step.name)
			continue
		}
		fmt.Fprintf(&b, " %s +%s (%s);", step.name, step.at.Round(time.Millisecond), (step.at - prev).Round(time.Millisecond))
		prev = step.at
	}
	return strings.TrimSuffix(b.String(), ";")
}
