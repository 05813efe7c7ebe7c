package gtid

import (
	"math"
	"slices"
)

// maxGNO is the largest transaction number MySQL accepts (2^63-1).
const maxGNO = math.MaxInt64

// interval is the inclusive range [start, end] of transaction numbers,
// 1 <= start <= end <= maxGNO. Bounds are unsigned so end+1 never overflows.
//
// Every []interval stored in a Set is normalised: sorted, non-empty intervals
// that neither overlap nor touch (a.end+1 < b.start). Normal form makes
// equality a plain slice comparison and lets every operation below run as a
// single linear merge.
type interval struct{ start, end uint64 }

func (iv interval) count() uint64 { return iv.end - iv.start + 1 }

// normalize sorts ivs and merges overlapping or adjacent intervals in place.
func normalize(ivs []interval) []interval {
	slices.SortFunc(ivs, func(a, b interval) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.start <= out[n-1].end+1 {
			out[n-1].end = max(out[n-1].end, iv.end)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// unionIntervals returns a ∪ b for normalised a and b as a new slice.
func unionIntervals(a, b []interval) []interval {
	out := make([]interval, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var next interval
		if j == len(b) || (i < len(a) && a[i].start <= b[j].start) {
			next = a[i]
			i++
		} else {
			next = b[j]
			j++
		}
		if n := len(out); n > 0 && next.start <= out[n-1].end+1 {
			out[n-1].end = max(out[n-1].end, next.end)
			continue
		}
		out = append(out, next)
	}
	return out
}

// subtractIntervals returns a − b for normalised a and b as a new slice.
func subtractIntervals(a, b []interval) []interval {
	// Each interval of b splits at most one interval of a in two.
	out := make([]interval, 0, len(a)+len(b))
	j := 0
	for _, iv := range a {
		// b intervals wholly before iv cannot affect iv or any later interval of a.
		for j < len(b) && b[j].end < iv.start {
			j++
		}
		start, covered := iv.start, false
		for k := j; k < len(b) && b[k].start <= iv.end; k++ {
			if b[k].start > start {
				out = append(out, interval{start, b[k].start - 1})
			}
			if b[k].end >= iv.end {
				covered = true
				break
			}
			start = b[k].end + 1
		}
		if !covered {
			out = append(out, interval{start, iv.end})
		}
	}
	return out
}

// intersectIntervals returns a ∩ b for normalised a and b as a new slice
// (nil when empty). The result is normalised: two result pieces can only touch
// if their source intervals in a or b touched, which normal form excludes.
func intersectIntervals(a, b []interval) []interval {
	var out []interval
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].start, b[j].start), min(a[i].end, b[j].end)
		if lo <= hi {
			out = append(out, interval{lo, hi})
		}
		if a[i].end < b[j].end {
			i++
		} else {
			j++
		}
	}
	return out
}

// containsIntervals reports whether b ⊆ a for normalised a and b. Because a's
// intervals never touch, each interval of b must lie inside a single one.
func containsIntervals(a, b []interval) bool {
	i := 0
	for _, iv := range b {
		for i < len(a) && a[i].end < iv.start {
			i++
		}
		if i == len(a) || a[i].start > iv.start || a[i].end < iv.end {
			return false
		}
	}
	return true
}

// addSaturating returns a+b, or math.MaxUint64 if the sum overflows.
func addSaturating(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
