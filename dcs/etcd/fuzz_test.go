package etcd

import (
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzLeaderKey: no leader key value makes the store panic; one that parses
// names a valid holder and ttl, and one that does not reads as held by
// dcs.UnknownHolder, never as "no leader".
func FuzzLeaderKey(f *testing.F) {
	for _, s := range []string{
		`{"holder":"db1","instance":"3fa2c09e1b7d4a55","ttl_seconds":5,"acquired_at":"2025-01-01T00:00:00Z"}`,
		`{"holder":"db1","ttl_seconds":5,"acquired_at":"2025-01-01T00:00:00Z"}`,
		`{"holder":"","ttl_seconds":-1}`, `{"ttl_seconds":99999999999999}`, "", "null", "{", "\xff",
	} {
		f.Add([]byte(s), int64(0))
		f.Add([]byte(s), int64(7))
	}
	s := &Store{name: "db2", instance: "0123456789abcdef"}
	now := time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value []byte, lease int64) {
		kv := &mvccpb.KeyValue{Key: []byte("/mysqlha/c/leader"), Value: value, Lease: lease, ModRevision: 3, CreateRevision: 2}
		l := s.leaderOf(kv, now.Add(-time.Second), 5*time.Second, now)
		if l.Holder == "" {
			t.Fatalf("a leader key read as no leader: %+v", l)
		}
		if l.Err == nil {
			if _, err := parseLeader("k", s.leaderValue(l.Holder, l.Instance, l.TTL, l.AcquiredAt)); err != nil {
				t.Fatalf("a valid leader record does not re-encode: %v", err)
			}
		}
		s.holderOfKV(kv)
	})
}
