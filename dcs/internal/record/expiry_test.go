package record

import (
	"testing"
	"time"
)

// TestExpired pins the boundary: held until observedAt+ttl, expired from
// that instant on, as client-go's isLeaseValid (observed+ttl After now).
func TestExpired(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := 5 * time.Second
	for _, tc := range []struct {
		name string
		now  time.Time
		want bool
	}{
		{"just observed", t0, false},
		{"one nanosecond before", t0.Add(ttl - time.Nanosecond), false},
		{"at observed+ttl", t0.Add(ttl), true},
		{"later", t0.Add(time.Hour), true},
		{"clock stepped back", t0.Add(-time.Hour), false},
	} {
		if got := Expired(t0, ttl, tc.now); got != tc.want {
			t.Errorf("%s: Expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}
