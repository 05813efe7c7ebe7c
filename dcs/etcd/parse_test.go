package etcd

import (
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A garbage holder name is cut in the lock's error, which the agent logs
// every loop: the whole name made 10 KB log lines once a second.
func TestUnreadableHolderIsCutInTheError(t *testing.T) {
	huge := strings.Repeat("x", 10<<10)
	s := &Store{name: "db2", instance: "0123456789abcdef"}
	now := time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC)
	kv := &mvccpb.KeyValue{Key: []byte("/mysqlha/c/leader"), ModRevision: 3, CreateRevision: 2,
		Value: []byte(`{"holder":"` + huge + `","ttl_seconds":5,"acquired_at":"2025-01-01T00:00:00Z"}`)}
	l := s.leaderOf(kv, now, 5*time.Second, now)
	if l.Err == nil || len(l.Err.Error()) > 500 || !strings.Contains(l.Err.Error(), "(10240 bytes)") {
		t.Fatalf("lock error of %d bytes, want the holder cut with its length: %.300v", len(l.Err.Error()), l.Err)
	}
}
