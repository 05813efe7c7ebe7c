package checker

import (
	"strings"
	"testing"
)

// The route moves from a to b in one update. Sampled one member at a time,
// a read just before the move and b's just after show both routed; the
// views, one read of both, never do.
func TestJudgeRoutingTrustsOneReadOverSkewedSamples(t *testing.T) {
	var s []Sample
	// a's sample at 1010 was read before the move at 1015, b's at 1025
	// after it: at the Tick of 1050 both latest samples say routed.
	s = append(s, every("a", 10, 1060, Sample{Known: true, Routed: true})...)
	s = append(s, every("a", 1060, 2000, Sample{Known: true})...)
	s = append(s, every("b", 25, 1025, Sample{Known: true, Writable: true})...)
	s = append(s, every("b", 1025, 2000, Sample{Known: true, Writable: true, Routed: true})...)
	r := Analyze(at(0), at(2000), s, nil, nil)
	if r.DualRoutable == 0 {
		t.Fatal("the skewed samples show no two routed members: the test does not stage the skew")
	}
	var views []RoutingView
	for ms := 0; ms < 2000; ms += 50 {
		v := RoutingView{At: at(ms + 10), Routed: []string{"a"}}
		if ms+10 >= 1015 {
			v.Routed = []string{"b"}
		}
		views = append(views, v)
	}
	r.JudgeRouting(at(0), at(2000), views)
	if r.DualRoutable != 0 || r.MaxRoutable != 1 || r.FirstDual != "" || strings.Contains(strings.Join(r.Violations(Expect{}), "\n"), "routable") {
		t.Fatalf("with one read of both: %+v, violations %v", r, r.Violations(Expect{}))
	}

	// Two members in one read are two routed members.
	views[30].Routed = []string{"a", "b"}
	r.JudgeRouting(at(0), at(2000), views)
	if r.DualRoutable != 1 || r.MaxRoutable != 2 || !strings.Contains(r.FirstDual, "routed [a b]") {
		t.Fatalf("two routed in one read: %+v", r)
	}
}
