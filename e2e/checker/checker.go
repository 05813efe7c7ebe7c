// Package checker judges one fault scenario from what was recorded while it
// ran: the client's acknowledged writes, the monitor's samples of every
// member, and each member's rows and GTID position at the end. It is the
// one judge of both end-to-end suites (e2e on loopback, e2e/onnode on real
// nodes); it is pure: the recording is the caller's, so the rules can be
// tested on made-up histories.
package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Sample is one look at one member.
type Sample struct {
	At     time.Time
	Member string
	// Known: the member's mysqld answered on its socket; Writable is
	// meaningful only then (read_only = 0).
	Known, Writable bool
	// Reachable: the member's pod network answered a TCP connection from
	// outside the pod.
	Reachable bool
	// Labelled: the pod carries the primary role label. Routed: its address
	// is a ready endpoint of the primary Service.
	Labelled, Routed bool
	// Asked, when set, is when the read behind this sample was sent: its
	// answer held at some instant in [Asked, At]. The member then counts as
	// writable only from a writable answer until the next read is sent, and
	// only if that read answers writable too, so that one member fenced and
	// another promoted between two reads is not taken for two primaries,
	// and a read left unanswered (a hung server) says nothing. Zero: the
	// answer holds from At until it is stale.
	Asked time.Time
}

// Write is one acknowledged write.
type Write struct {
	ID int64
	At time.Time
}

// Final is one member at the end of the scenario, after healing.
type Final struct {
	Member  string
	Primary bool
	IDs     map[int64]bool
	GTID    string
}

// Report is the verdict material of one trial.
type Report struct {
	Acked int
	// Lost: acknowledged writes missing from the final primary. Missing:
	// per other member, acknowledged writes it lacks.
	Lost    []int64
	Missing map[string]int
	// Instants are judged every Tick, and at every answer of a sample with
	// Asked. Ticks: how many Tick instants; DualWritable: at how many
	// instants of either kind more than one member was writable;
	// DualRoutable, DualLabelled: at how many Ticks more than one was
	// routed, labelled primary. Max*: the most at once.
	Ticks                                    int
	DualWritable, DualRoutable, DualLabelled int
	MaxWritable, MaxRoutable, MaxLabelled    int
	// IsolatedWritable: Tick instants at which a member that could not be
	// reached was writable (an isolated primary that has not yet demoted
	// itself: CloudNativePG's kept committing for 185 s, CNPG #11280).
	IsolatedWritable int
	// FirstDual describes the first instant with two writable or routed
	// members, for the failure message.
	FirstDual string
	// LongestOutage: the longest time within the window without an
	// acknowledged write, the window's ends included.
	LongestOutage time.Duration
	// GTIDConverged: every final member reports the same GTID position.
	GTIDConverged bool
	GTIDs         map[string]string
}

// Tick is the spacing of the instants at which members are compared.
const Tick = 50 * time.Millisecond

// stale: a sample older than this says nothing about the instant judged.
const stale = 500 * time.Millisecond

// Analyze judges the window [from, to].
func Analyze(from, to time.Time, samples []Sample, writes []Write, finals []Final) Report {
	r := Report{Acked: len(writes), Missing: map[string]int{}, GTIDs: map[string]string{}}
	r.countDuals(from, to, samples)
	r.LongestOutage = longestOutage(from, to, writes)
	r.compareFinals(writes, finals)
	return r
}

// countDuals walks the window in Tick steps, and stops at every answer of a
// sample with Asked as well: two members' spans of confirmed writability
// overlap only if one span's start lies in the other, so no overlap between
// two ticks is missed. At each instant a member's state is its latest sample
// at or before it, unless stale.
func (r *Report) countDuals(from, to time.Time, samples []Sample) {
	byMember := map[string][]Sample{}
	var instants []time.Time
	for at := from; !at.After(to); at = at.Add(Tick) {
		instants = append(instants, at)
	}
	for _, s := range samples {
		byMember[s.Member] = append(byMember[s.Member], s)
		if !s.Asked.IsZero() && !s.At.Before(from) && !s.At.After(to) {
			instants = append(instants, s.At)
		}
	}
	for _, ss := range byMember {
		sort.Slice(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) })
	}
	slices.SortFunc(instants, func(a, b time.Time) int { return a.Compare(b) })
	instants = slices.CompactFunc(instants, time.Time.Equal)
	next := map[string]int{}
	for _, at := range instants {
		// Ticks and IsolatedWritable measure time, so they count the
		// evenly spaced instants only.
		onTick := at.Sub(from)%Tick == 0
		var writable, routed, labelled []string
		for m, ss := range byMember {
			i := next[m]
			for i < len(ss) && !ss[i].At.After(at) {
				i++
			}
			next[m] = i
			if i == 0 || at.Sub(ss[i-1].At) > stale {
				continue
			}
			s := ss[i-1]
			if s.Known && s.Writable && confirmed(ss, i, at) {
				writable = append(writable, m)
				if !s.Reachable && onTick {
					r.IsolatedWritable++
				}
			}
			if s.Routed {
				routed = append(routed, m)
			}
			if s.Labelled {
				labelled = append(labelled, m)
			}
		}
		if !onTick {
			// Routing and labels are read from a watch cache, one member
			// at a time, with no Asked to confirm them: between two
			// members' reads they carry the same skew the Tick rule
			// always allowed, so they are judged at Ticks only.
			routed, labelled = nil, nil
		} else {
			r.Ticks++
		}
		r.MaxWritable, r.MaxRoutable, r.MaxLabelled = max(r.MaxWritable, len(writable)),
			max(r.MaxRoutable, len(routed)), max(r.MaxLabelled, len(labelled))
		if len(writable) > 1 {
			r.DualWritable++
		}
		if len(routed) > 1 {
			r.DualRoutable++
		}
		if len(labelled) > 1 {
			r.DualLabelled++
		}
		if r.FirstDual == "" && (len(writable) > 1 || len(routed) > 1) {
			slices.Sort(writable)
			slices.Sort(routed)
			slices.Sort(labelled)
			r.FirstDual = fmt.Sprintf("at +%s writable %v routed %v labelled %v", at.Sub(from).Round(time.Millisecond), writable, routed, labelled)
		}
	}
}

// confirmed: a writable sample with Asked holds at instant at only if the
// member's next read, sent at or after it, answered writable too. ss[i] is
// that next sample, the first answered after at.
func confirmed(ss []Sample, i int, at time.Time) bool {
	if ss[i-1].Asked.IsZero() {
		return true
	}
	return i < len(ss) && ss[i].Known && ss[i].Writable && !ss[i].Asked.Before(at)
}

func longestOutage(from, to time.Time, writes []Write) time.Duration {
	start, end := longestGap(from, to, writes)
	return end.Sub(start)
}

// longestGap is the longest time in [from, to] without an acknowledged
// write: its start and its end.
func longestGap(from, to time.Time, writes []Write) (time.Time, time.Time) {
	at := acksWithin(from, to, writes)
	start, end := from, from
	for i := 1; i < len(at); i++ {
		if at[i].Sub(at[i-1]) > end.Sub(start) {
			start, end = at[i-1], at[i]
		}
	}
	return start, end
}

// acksWithin is the acknowledgement times within [from, to], sorted, with
// from and to as the window's ends.
func acksWithin(from, to time.Time, writes []Write) []time.Time {
	at := make([]time.Time, 0, len(writes)+2)
	at = append(at, from)
	for _, w := range writes {
		if !w.At.Before(from) && !w.At.After(to) {
			at = append(at, w.At)
		}
	}
	at = append(at, to)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	return at
}

func (r *Report) compareFinals(writes []Write, finals []Final) {
	gtids := map[string]bool{}
	for _, f := range finals {
		var missing []int64
		for _, w := range writes {
			if !f.IDs[w.ID] {
				missing = append(missing, w.ID)
			}
		}
		if f.Primary {
			r.Lost = missing
		} else {
			r.Missing[f.Member] = len(missing)
		}
		r.GTIDs[f.Member] = f.GTID
		gtids[f.GTID] = true
	}
	r.GTIDConverged = len(finals) > 0 && len(gtids) == 1
}

// Expect is what a scenario promises.
type Expect struct {
	// MayLose: how many acknowledged writes the documentation allows this
	// scenario to lose (async replication only); 0 in lossless mode.
	MayLose int
	// MaxOutage bounds the client's longest outage.
	MaxOutage time.Duration
	// NoFinals: the scenario read no member at the end and is judged on
	// its samples and writes alone. Otherwise an empty finals list is a
	// violation: members that could not be read prove nothing.
	NoFinals bool
}

// Violations lists every broken promise: two writable or routable members
// at any instant (never allowed), lost writes beyond MayLose, a replica
// missing writes the primary has, unconverged GTIDs, a longer outage.
func (r Report) Violations(e Expect) []string {
	var v []string
	if r.DualWritable > 0 {
		v = append(v, fmt.Sprintf("%d instants with two writable members (first %s)", r.DualWritable, r.FirstDual))
	}
	if r.DualRoutable > 0 {
		v = append(v, fmt.Sprintf("%d instants with two routable members (first %s)", r.DualRoutable, r.FirstDual))
	}
	if len(r.Lost) > e.MayLose {
		v = append(v, fmt.Sprintf("%d acknowledged writes lost (allowed %d), first ids %v", len(r.Lost), e.MayLose, r.Lost[:min(5, len(r.Lost))]))
	}
	for _, m := range sortedKeys(r.Missing) {
		if n := r.Missing[m]; n > len(r.Lost) {
			v = append(v, fmt.Sprintf("replica %s lacks %d acknowledged writes that the primary has", m, n-len(r.Lost)))
		}
	}
	if !r.GTIDConverged && !e.NoFinals {
		v = append(v, "GTID positions did not converge: "+r.gtidList())
	}
	if e.MaxOutage > 0 && r.LongestOutage > e.MaxOutage {
		v = append(v, fmt.Sprintf("longest write outage %s, bound %s", r.LongestOutage.Round(time.Millisecond), e.MaxOutage))
	}
	return v
}

func (r Report) gtidList() string {
	var b strings.Builder
	for _, m := range sortedKeys(r.GTIDs) {
		fmt.Fprintf(&b, "%s=%q ", m, r.GTIDs[m])
	}
	return strings.TrimSpace(b.String())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
