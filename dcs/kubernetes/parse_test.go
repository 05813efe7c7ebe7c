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
	lease := func(spec coordinationv1.LeaseSpec, ann map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "c-leader", Namespace: "ns", ResourceVersion: "42", Annotations: ann}, Spec: spec}
	}
	m0 := coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](5)}
	inst := func(v string) map[string]string { return map[string]string{HolderInstanceAnnotation: v} }
	for _, tc := range []struct {
		name     string
		spec     coordinationv1.LeaseSpec
		ann      map[string]string
		holder   string // "" = no leader
		instance string
		ttl      time.Duration
		corrupt  string
	}{
		{"valid with instance", m0, inst("m0/3fa2c09e1b7d4a55"), "m0", "3fa2c09e1b7d4a55", 5 * time.Second, ""},
		{"instance written for another holder", m0, inst("m7/3fa2c09e1b7d4a55"), "m0", "", 5 * time.Second, ""},
		{"malformed instance of the holder", m0, inst("m0/Not An Id"), dcs.UnknownHolder, "", cfgTTL, `annotation mysqlha.io/holder-instance`},
		{"empty instance of the holder", m0, inst("m0/"), dcs.UnknownHolder, "", cfgTTL, `agent instance id ""`},
		{"instance annotation without holder", m0, inst("3fa2c09e1b7d4a55"), dcs.UnknownHolder, "", cfgTTL, `is not <holder>/<instance>`},
		{"released with a left-over annotation", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](5)}, inst("m0/3fa2c09e1b7d4a55"), "", "", 0, ""},
		{"valid", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](5)}, nil, "m0", "", 5 * time.Second, ""},
		{"released", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](5)}, nil, "", "", 0, ""},
		{"released empty string", coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](5)}, nil, "", "", 0, ""},
		{"zero duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](0)}, nil, dcs.UnknownHolder, "", cfgTTL, "impossible leaseDurationSeconds 0"},
		{"negative duration", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](-5)}, nil, dcs.UnknownHolder, "", cfgTTL, "impossible leaseDurationSeconds -5"},
		{"released but no duration", coordinationv1.LeaseSpec{}, nil, dcs.UnknownHolder, "", cfgTTL, "leaseDurationSeconds is missing"},
		{"negative transitions", coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](5), LeaseTransitions: ptr.To[int32](-1)}, nil, dcs.UnknownHolder, "", cfgTTL, "negative leaseTransitions -1"},
		{"holder is the unknown marker", coordinationv1.LeaseSpec{HolderIdentity: ptr.To(dcs.UnknownHolder), LeaseDurationSeconds: ptr.To[int32](5)}, nil, dcs.UnknownHolder, "", cfgTTL, "holder name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := leaderOf(lease(tc.spec, tc.ann), t0, cfgTTL, t0.Add(tc.ttl-time.Nanosecond))
			if tc.holder == "" {
				if l != nil {
					t.Fatalf("got %+v, want no leader", l)
				}
				return
			}
			if l == nil || l.Holder != tc.holder || l.Instance != tc.instance || l.TTL != tc.ttl || l.Expired || l.Version != "42" {
				t.Fatalf("got %+v, want holder %q instance %q ttl %v, not yet expired", l, tc.holder, tc.instance, tc.ttl)
			}
			if tc.corrupt == "" && l.Err != nil || tc.corrupt != "" && (!errors.Is(l.Err, dcs.ErrCorrupt) || !strings.Contains(l.Err.Error(), tc.corrupt) || !strings.Contains(l.Err.Error(), "Lease ns/c-leader")) {
				t.Fatalf("err %v, want corrupt %q naming the Lease", l.Err, tc.corrupt)
			}
			if l2 := leaderOf(lease(tc.spec, tc.ann), t0, cfgTTL, t0.Add(tc.ttl)); !l2.Expired {
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

// A garbage holder name (or holder/instance annotation) is cut in the
// lock's error, which the agent logs every loop: the whole name made 10 KB
// log lines once a second.
func TestUnreadableHolderIsCutInTheError(t *testing.T) {
	huge := strings.Repeat("x", 10<<10)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, l := range []*coordinationv1.Lease{
		{ObjectMeta: metav1.ObjectMeta{Name: "c-leader", Namespace: "ns"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(huge), LeaseDurationSeconds: ptr.To[int32](5)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-leader", Namespace: "ns", Annotations: map[string]string{HolderInstanceAnnotation: huge}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("m0"), LeaseDurationSeconds: ptr.To[int32](5)}},
	} {
		ld := leaderOf(l, now, 7*time.Second, now)
		if ld == nil || ld.Err == nil || len(ld.Err.Error()) > 500 || !strings.Contains(ld.Err.Error(), "(10240 bytes)") {
			t.Fatalf("lock error of %d bytes, want the garbage cut with its length: %.300v", len(ld.Err.Error()), ld.Err)
		}
	}
}
