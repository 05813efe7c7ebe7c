package kubernetes

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mysqlha/mysqlha/dcs"
)

// TestLeaderOf covers lock records the API server's validation would
// reject today but a store must still survive (an older server, a bug).
func TestLeaderOf(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cfgTTL := 7 * time.Second
	lease := func(spec coordinationv1.LeaseSpec) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "c-leader", Namespace: "ns", ResourceVersion: "42"}, Spec: spec}
	}
	for _, tc := range []struct {
		name    string
		spec    coordinationv1.LeaseSpec
		holder  string // "" = no leader
		ttl     time.Duration
		corrupt string
	}{
		{"valid", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](5)}, "m0", 5 * time.Second, ""},
		{"released", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](5)}, "", 0, ""},
		{"released empty string", coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](5)}, "", 0, ""},
		{"zero duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](0)}, dcs.UnknownHolder, cfgTTL, "impossible leaseDurationSeconds 0"},
		{"negative duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](-5)}, dcs.UnknownHolder, cfgTTL, "impossible leaseDurationSeconds -5"},
		{"released but no duration", coordinationv1.LeaseSpec{}, dcs.UnknownHolder, cfgTTL, "leaseDurationSeconds is missing"},
		{"negative transitions", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](5), LeaseTransitions: ptr.To[int32](-1)}, dcs.UnknownHolder, cfgTTL, "negative leaseTransitions -1"},
		{"holder is the unknown marker", coordinationv1.LeaseSpec{HolderIdentity: ptr.To(dcs.UnknownHolder), LeaseDurationSeconds: ptr.To[int32](5)}, dcs.UnknownHolder, cfgTTL, "holder name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := leaderOf(lease(tc.spec), t0, cfgTTL, t0.Add(tc.ttl-time.Nanosecond))
			if tc.holder == "" {
				if l != nil {
					t.Fatalf("got %+v, want no leader", l)
				}
				return
			}
			if l == nil || l.Holder != tc.holder || l.TTL != tc.ttl || l.Expired || l.Version != "42" {
				t.Fatalf("got %+v, want holder %q ttl %v, not yet expired", l, tc.holder, tc.ttl)
			}
			if tc.corrupt == "" && l.Err != nil || tc.corrupt != "" && (!errors.Is(l.Err, dcs.ErrCorrupt) || !strings.Contains(l.Err.Error(), tc.corrupt) || !strings.Contains(l.Err.Error(), "Lease ns/c-leader")) {
				t.Fatalf("err %v, want corrupt %q naming the Lease", l.Err, tc.corrupt)
			}
			if l2 := leaderOf(lease(tc.spec), t0, cfgTTL, t0.Add(tc.ttl)); !l2.Expired {
				t.Fatalf("not expired after %v: %+v", tc.ttl, l2)
			}
		})
	}
}

func TestIsNewer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10", "9", true}, {"9", "10", false}, {"10", "10", false},
		{"garbage", "10", true}, {"10", "garbage", true}, {"x", "x", false},
	} {
		if got := isNewer(tc.a, tc.b); got != tc.want {
			t.Errorf("isNewer(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
