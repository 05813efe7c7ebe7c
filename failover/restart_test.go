package failover

import (
	"testing"
	"time"
)

func TestRestartRefusal(t *testing.T) {
	if why := RestartRefusal(true); why == "" {
		t.Error("the lock holder's mysqld may be restarted in place")
	}
	if why := RestartRefusal(false); why != "" {
		t.Errorf("a replica's restart refused: %s", why)
	}
}

// A mysqld counts as restarted only when it started well after the
// request: one that started just before it (a fresh cluster, its start
// known to the second) must still be restarted.
func TestRestartedSince(t *testing.T) {
	req := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		started time.Duration // after the request
		want    bool
	}{
		{-time.Hour, false},
		{-500 * time.Millisecond, false},
		{time.Second, false}, // Uptime's rounding: it may have started before the request
		{4 * time.Second, false},
		{5 * time.Second, false},
		{6 * time.Second, true},
		{time.Minute, true},
	} {
		if got := RestartedSince(req.Add(tc.started), req); got != tc.want {
			t.Errorf("started %v after the request: restarted %v, want %v", tc.started, got, tc.want)
		}
	}
}
