package record

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestMemberNeedsWrite(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lag := time.Second
	last := dcs.Member{Name: "m0", Role: dcs.RoleReplica, GTIDExecuted: "a:1", Lag: &lag, UpdatedAt: t0}
	volatileOnly := last
	volatileOnly.GTIDExecuted, volatileOnly.Lag, volatileOnly.UpdatedAt = "a:1-2", nil, t0.Add(time.Second)
	roleChange := last
	roleChange.Role = dcs.RolePrimary
	emptyTags := last
	emptyTags.Tags = map[string]string{}
	for _, tc := range []struct {
		name string
		last *dcs.Member
		next dcs.Member
		age  time.Duration
		want bool
	}{
		{"first write", nil, last, 0, true},
		{"volatile only, fresh", &last, volatileOnly, 5 * time.Second, false},
		{"volatile only, due", &last, volatileOnly, 10 * time.Second, true},
		{"role change", &last, roleChange, time.Millisecond, true},
		{"nil vs empty tags", &last, emptyTags, time.Millisecond, false},
	} {
		if got := MemberNeedsWrite(tc.last, t0, tc.next, t0.Add(tc.age), 10*time.Second); got != tc.want {
			t.Errorf("%s: MemberNeedsWrite = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHistoryBound(t *testing.T) {
	var h []dcs.HistoryEntry
	for i := 0; i < dcs.MaxHistory+7; i++ {
		h = AppendHistory(h, dcs.HistoryEntry{Kind: dcs.HistoryFailover, To: "m1", Reason: string(rune('a' + i%26)), At: time.Unix(int64(i), 0)})
	}
	if len(h) != dcs.MaxHistory || h[0].At.Unix() != 7 || h[len(h)-1].At.Unix() != dcs.MaxHistory+6 {
		t.Fatalf("history not trimmed to the newest %d: len %d, first %v", dcs.MaxHistory, len(h), h[0].At)
	}
	b, err := EncodeHistory(h)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeHistory("k", b)
	if err != nil || len(back) != len(h) {
		t.Fatalf("round trip: %d entries, %v", len(back), err)
	}
}

// TestHistoryKeepsANewerVersionsKinds: during a rolling upgrade an older
// agent reads a history holding a kind only newer versions write; it must
// neither call the history unreadable nor drop the entry when appending.
func TestHistoryKeepsANewerVersionsKinds(t *testing.T) {
	stored := `[{"kind":"failover","from":"m0","to":"m1","at":"2026-12-01T00:00:00Z"},` +
		`{"kind":"rewind","to":"m0","at":"2026-12-01T00:01:00Z","reason":"rewound 3 transactions","extra":1}]`
	h, err := DecodeHistory("k", []byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].Kind != dcs.HistoryOther || h[1].KindString() != "rewind" || h[1].Reason != "rewound 3 transactions" {
		t.Fatalf("decoded %+v", h)
	}
	h = AppendHistory(h, dcs.HistoryEntry{Kind: dcs.HistorySwitchover, From: "m1", To: "m2", At: time.Unix(1, 0)})
	b, err := EncodeHistory(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"kind":"rewind"`) {
		t.Fatalf("the newer kind was not kept: %s", b)
	}
	// Text that cannot be a kind's name is still corrupt.
	if _, err := DecodeHistory("k", []byte(`[{"kind":"Fail Over!","to":"m1","at":"2026-12-01T00:00:00Z"}]`)); !errors.Is(err, dcs.ErrCorrupt) {
		t.Fatalf("a malformed kind: %v, want ErrCorrupt", err)
	}
}

func TestDecodersNameTheRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		dec  func() error
		want string
	}{
		{"member json", func() error { _, err := DecodeMember("K", "m0", []byte("{")); return err }, "K: member record is not valid JSON"},
		{"member name", func() error {
			_, err := DecodeMember("K", "m0", []byte(`{"name":"m1","role":"replica","replication":"none","updated_at":"2025-01-01T00:00:00Z"}`))
			return err
		}, `record names member "m1", want "m0"`},
		{"member lag", func() error {
			_, err := DecodeMember("K", "m0", []byte(`{"name":"m0","role":"replica","replication":"none","updated_at":"2025-01-01T00:00:00Z","lag":"soon"}`))
			return err
		}, `lag: time: invalid duration "soon"`},
		{"member port", func() error {
			_, err := DecodeMember("K", "m0", []byte(`{"name":"m0","role":"replica","replication":"none","updated_at":"2025-01-01T00:00:00Z","mysql_addr":"h:99999"}`))
			return err
		}, `mysql address "h:99999" must be host:port`},
		{"member instance", func() error {
			_, err := DecodeMember("K", "m0", []byte(`{"name":"m0","instance":"Not/An-Id","role":"replica","replication":"none","updated_at":"2025-01-01T00:00:00Z"}`))
			return err
		}, `K: invalid member record: dcs: invalid argument: agent instance id "Not/An-Id"`},
		{"config rule", func() error { _, err := DecodeConfig("K", []byte(`{"ttl":"2s"}`)); return err }, "K: invalid config"},
		{"config type", func() error { _, err := DecodeConfig("K", []byte(`{"ttl":5}`)); return err }, "config is not valid JSON"},
		{"switchover time", func() error { _, err := DecodeSwitchover("K", []byte(`{"requested_at":"yesterday"}`)); return err }, "switchover request is not valid JSON"},
		{"initialized", func() error { _, err := DecodeInitialized("K", []byte(`{"cluster_id":"x"}`)); return err }, "initialized at is missing"},
		{"history entry", func() error {
			_, err := DecodeHistory("K", []byte(`[{"kind":"failover","to":"","at":"2025-01-01T00:00:00Z"}]`))
			return err
		}, "invalid history entry 0"},
	} {
		err := tc.dec()
		if !errors.Is(err, dcs.ErrCorrupt) || errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrCorrupt (not ErrInvalid) containing %q", tc.name, err, tc.want)
		}
	}
}

func TestMemberInstanceRoundTrip(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := dcs.Member{Name: "m0", Instance: "3fa2c09e1b7d4a55", Role: dcs.RoleReplica, Replication: dcs.ReplicationRunning, UpdatedAt: t0}
	b, err := EncodeMember(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"instance":"3fa2c09e1b7d4a55"`) {
		t.Fatalf("encoded record lacks the instance: %s", b)
	}
	back, err := DecodeMember("K", "m0", b)
	if err != nil || back.Instance != m.Instance || !back.UpdatedAt.Equal(t0) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}

	// An older agent's record has no instance: readable, Instance "".
	old, err := DecodeMember("K", "m0", []byte(`{"name":"m0","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`))
	if err != nil || old.Instance != "" {
		t.Fatalf("record without instance: %+v, %v; want Instance \"\" and no error", old, err)
	}
	if _, err := EncodeMember(dcs.Member{Name: "m0", Instance: "UPPER", UpdatedAt: t0}); !errors.Is(err, dcs.ErrInvalid) {
		t.Fatalf("encoding a malformed instance: %v, want ErrInvalid", err)
	}
}

func TestPrepareMemberInstance(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m, b, err := PrepareMember("m0", "3fa2c09e1b7d4a55", dcs.Member{Role: dcs.RoleReplica}, now)
	if err != nil || m.Name != "m0" || m.Instance != "3fa2c09e1b7d4a55" || !strings.Contains(string(b), `"instance":"3fa2c09e1b7d4a55"`) {
		t.Fatalf("empty name and instance are not filled in: %+v %s %v", m, b, err)
	}
	if _, _, err := PrepareMember("m0", "3fa2c09e1b7d4a55", dcs.Member{Instance: "3fa2c09e1b7d4a55"}, now); err != nil {
		t.Fatalf("own instance refused: %v", err)
	}
	_, _, err = PrepareMember("m0", "3fa2c09e1b7d4a55", dcs.Member{Instance: "0123456789abcdef"}, now)
	if !errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), "0123456789abcdef") {
		t.Fatalf("another instance's record: %v, want ErrInvalid naming it", err)
	}
}

func TestStoreInstance(t *testing.T) {
	a, err := storeInstance("")
	if err != nil || len(a) != 16 || dcs.ValidateInstance(a) != nil {
		t.Fatalf("drawn instance %q, %v", a, err)
	}
	if b, _ := storeInstance(""); b == a {
		t.Fatalf("two draws gave the same instance %q", a)
	}
	if got, err := storeInstance("given-1"); got != "given-1" || err != nil {
		t.Fatalf("storeInstance(given-1) = %q, %v", got, err)
	}
	if _, err := storeInstance("a/b"); !errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), "leave Instance empty") {
		t.Fatalf("storeInstance(a/b) = %v, want ErrInvalid naming the fix", err)
	}
}

func TestHolderDescription(t *testing.T) {
	for _, tc := range []struct{ holder, instance, want string }{
		{"m1", "0123456789abcdef", "m1"},
		{"m0", "3fa2c09e1b7d4a55", "m0"},
		{"m0", "0123456789abcdef", "m0 (another agent instance 0123456789abcdef; two agents may be running with one name)"},
		{"m0", "", "m0 (with no agent instance id: written by an older agent or by hand, so not this agent's)"},
	} {
		if got := HolderDescription("m0", "3fa2c09e1b7d4a55", tc.holder, tc.instance); got != tc.want {
			t.Errorf("HolderDescription(%s, %q) = %q, want %q", tc.holder, tc.instance, got, tc.want)
		}
	}
}

func TestPartialConfigTakesDefaults(t *testing.T) {
	c, err := DecodeConfig("K", []byte(`{"paused":true,"semi_sync":"on","future_field":1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := dcs.DefaultConfig()
	want.Paused, want.SemiSync = true, dcs.SemiSyncOn
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

// FuzzDecode: no input makes a decoder panic, and whatever decodes
// re-encodes (it passed validation).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"m0","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z","lag":"1s","tags":{"a":"b"}}`,
		`{"name":"m0","instance":"3fa2c09e1b7d4a55","role":"replica","replication":"none","updated_at":"2025-01-01T00:00:00Z"}`,
		`{"ttl":"5s","loop_wait":"1s"}`, `{"from":"a","to":"b","requested_at":"2025-01-01T00:00:00Z"}`,
		`{"cluster_id":"x","at":"2025-01-01T00:00:00Z"}`, `[{"kind":"switchover","to":"m1","at":"2025-01-01T00:00:00Z"}]`,
		"", "null", "\x00", `{"lag":null}`, `[null]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := DecodeMember("k", "m0", b); err == nil {
			if _, err := EncodeMember(m); err != nil {
				t.Fatalf("decoded member does not re-encode: %v", err)
			}
		}
		if c, err := DecodeConfig("k", b); err == nil {
			if _, err := EncodeConfig(c); err != nil {
				t.Fatalf("decoded config does not re-encode: %v", err)
			}
		}
		if sw, err := DecodeSwitchover("k", b); err == nil {
			if _, err := EncodeSwitchover(sw); err != nil {
				t.Fatalf("decoded switchover does not re-encode: %v", err)
			}
		}
		if in, err := DecodeInitialized("k", b); err == nil {
			if _, err := EncodeInitialized(in); err != nil {
				t.Fatalf("decoded initialized does not re-encode: %v", err)
			}
		}
		if h, err := DecodeHistory("k", b); err == nil {
			if _, err := EncodeHistory(h); err != nil {
				t.Fatalf("decoded history does not re-encode: %v", err)
			}
		}
	})
}

// The agent's version rides in the record; an older agent's record, which
// lacks it, still decodes, and an empty one is not written.
func TestMemberAgentVersion(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := dcs.Member{Name: "m0", Role: dcs.RoleReplica, Replication: dcs.ReplicationRunning, UpdatedAt: t0, AgentVersion: "v1.2.3"}
	b, err := EncodeMember(m)
	if err != nil || !strings.Contains(string(b), `"agent_version":"v1.2.3"`) {
		t.Fatalf("encoded record %s (%v) lacks agent_version", b, err)
	}
	if back, err := DecodeMember("K", "m0", b); err != nil || back.AgentVersion != "v1.2.3" {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	m.AgentVersion = ""
	if b, _ := EncodeMember(m); strings.Contains(string(b), "agent_version") {
		t.Fatalf("an empty version is written: %s", b)
	}
	old, err := DecodeMember("K", "m0", []byte(`{"name":"m0","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`))
	if err != nil || old.AgentVersion != "" {
		t.Fatalf("record without agent_version: %+v, %v", old, err)
	}
}

// The receiver's state round-trips; a record from an older agent has none,
// and a state only a newer agent knows reads as unknown, not as corrupt.
func TestMemberReceiver(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := dcs.Member{Name: "m0", Role: dcs.RoleReplica, Replication: dcs.ReplicationStopped, UpdatedAt: t0, Receiver: dcs.ReceiverConnecting}
	b, err := EncodeMember(m)
	if err != nil || !strings.Contains(string(b), `"receiver":"connecting"`) {
		t.Fatalf("encoded record %s (%v) lacks the receiver", b, err)
	}
	if back, err := DecodeMember("K", "m0", b); err != nil || back.Receiver != dcs.ReceiverConnecting {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, rec := range []string{
		`{"name":"m0","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`,
		`{"name":"m0","role":"replica","replication":"running","receiver":"dreaming","updated_at":"2025-01-01T00:00:00Z"}`,
	} {
		if got, err := DecodeMember("K", "m0", []byte(rec)); err != nil || got.Receiver != dcs.ReceiverUnknown {
			t.Fatalf("%s: %+v, %v; want receiver unknown", rec, got, err)
		}
	}
	m.Receiver = 9
	if _, err := EncodeMember(m); !errors.Is(err, dcs.ErrInvalid) {
		t.Fatalf("receiver state 9 encoded: %v", err)
	}
}

// TestRebuildSettingsRoundTrip: an explicit reseed_after or
// maximum_lag_for_reads of 0 (never, no bound) is not mistaken for an absent
// one (the default), and a policy survives.
func TestRebuildSettingsRoundTrip(t *testing.T) {
	c := dcs.DefaultConfig()
	c.RebuildDiverged, c.ReseedAfter, c.MaximumLagForReads = dcs.RebuildReport, 0, 0
	b, err := EncodeConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeConfig("K", b)
	if err != nil || back != c {
		t.Fatalf("DecodeConfig(%s) = %+v, %v; want %+v", b, back, err, c)
	}
	if _, err := DecodeConfig("K", []byte(`{"rebuild_diverged":"always"}`)); err == nil || !strings.Contains(err.Error(), `unknown rebuild_diverged policy "always"`) {
		t.Fatalf("an unknown policy decoded: %v", err)
	}
}
