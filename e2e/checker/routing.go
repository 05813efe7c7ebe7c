package checker

import (
	"fmt"
	"slices"
	"time"
)

// RoutingView is one read of who the primary Service routes to and who
// carries the primary label, every member from the same read of the watch
// caches. Samples read each member at its own instant: a route that moves
// from one member to the next in one update (the primary's own
// EndpointSlice) can then show both routed, the old one read just before
// the move and the new one just after.
type RoutingView struct {
	At               time.Time
	Routed, Labelled []string
}

// JudgeRouting judges routing and labels from views instead of the
// samples: at every Tick of [from, to], the latest view at or before it,
// unless stale. It replaces MaxRoutable, MaxLabelled, DualRoutable and
// DualLabelled, and FirstDual when no two members were writable.
func (r *Report) JudgeRouting(from, to time.Time, views []RoutingView) {
	views = slices.Clone(views)
	slices.SortFunc(views, func(a, b RoutingView) int { return a.At.Compare(b.At) })
	r.MaxRoutable, r.MaxLabelled, r.DualRoutable, r.DualLabelled = 0, 0, 0, 0
	if r.DualWritable == 0 {
		r.FirstDual = ""
	}
	i := 0
	for at := from; !at.After(to); at = at.Add(Tick) {
		for i < len(views) && !views[i].At.After(at) {
			i++
		}
		if i == 0 || at.Sub(views[i-1].At) > stale {
			continue
		}
		v := views[i-1]
		r.MaxRoutable, r.MaxLabelled = max(r.MaxRoutable, len(v.Routed)), max(r.MaxLabelled, len(v.Labelled))
		if len(v.Labelled) > 1 {
			r.DualLabelled++
		}
		if len(v.Routed) > 1 {
			r.DualRoutable++
			if r.FirstDual == "" {
				r.FirstDual = fmt.Sprintf("at +%s routed %v labelled %v, in one read", at.Sub(from).Round(time.Millisecond), v.Routed, v.Labelled)
			}
		}
	}
}
