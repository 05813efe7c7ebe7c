package kubernetes

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzLeaderLease: no Lease content makes parseLeader panic; what parses
// has a ttl within bounds and a valid holder.
func FuzzLeaderLease(f *testing.F) {
	f.Add("db1", "db1/3fa2c09e1b7d4a55", int32(5), int32(0))
	f.Add("", "", int32(0), int32(-1))
	f.Add("db1", "no-slash", int32(99999), int32(3))
	f.Add("db 1", "db2/x", int32(-5), int32(1))
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, holder, annotation string, ttl, transitions int32) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "c-leader", Namespace: "ns", Annotations: map[string]string{HolderInstanceAnnotation: annotation}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &ttl, LeaseTransitions: &transitions,
				AcquireTime: &metav1.MicroTime{Time: t0}, RenewTime: &metav1.MicroTime{Time: t0}},
		}
		r, err := parseLeader(l)
		if err != nil {
			return
		}
		if r.ttl <= 0 || (r.holder == "" && holder != "") || r.transitions < 0 {
			t.Fatalf("parsed an invalid lease as %+v", r)
		}
	})
}
