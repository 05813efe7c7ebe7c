package record

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// TestConfigKeysAreSettingKeys: the stored config record and the settings
// operators write (dcs.Config.Set) use one name per setting, the one
// Validate's messages give.
func TestConfigKeysAreSettingKeys(t *testing.T) {
	c := dcs.DefaultConfig()
	c.Paused, c.Failsafe, c.Fenced = true, true, "db2" // written only when set
	b, err := EncodeConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range stored {
		keys = append(keys, k)
	}
	want := dcs.SettingKeys()
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("stored config keys %v, setting keys %v", keys, want)
	}
}

// TestConfigHistoryEntry: a config change's entry names no members and
// lists its changes in the reason.
func TestConfigHistoryEntry(t *testing.T) {
	timeT := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := dcs.HistoryEntry{Kind: dcs.HistoryConfig, At: timeT, Reason: "ttl: 5s -> 10s"}
	if err := ValidateHistoryEntry(ok); err != nil {
		t.Fatalf("config entry: %v", err)
	}
	b, err := EncodeHistory([]dcs.HistoryEntry{ok})
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeHistory("k", b)
	if err != nil || len(back) != 1 || back[0].Kind != dcs.HistoryConfig || back[0].Reason != ok.Reason {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []dcs.HistoryEntry{
		{Kind: dcs.HistoryConfig, At: timeT},
		{Kind: dcs.HistoryConfig, At: timeT, Reason: "x", To: "m1"},
		{Kind: dcs.HistoryConfig, Reason: "x"},
	} {
		if err := ValidateHistoryEntry(bad); err == nil {
			t.Errorf("%+v: valid, want an error", bad)
		}
	}
}
