package record

import (
	"errors"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestDecodeState(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fallback := dcs.DefaultConfig()
	fallback.TTL = 9 * time.Second
	stored := dcs.DefaultConfig()
	stored.Paused = true
	mustEncode := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := StoredState{
		Config:      &Stored{Where: "config", Data: mustEncode(EncodeConfig(stored)), Version: "1"},
		Switchover:  &Stored{Where: "switchover", Data: mustEncode(EncodeSwitchover(dcs.Switchover{To: "m1", RequestedAt: t0})), Version: "2"},
		Initialized: &Stored{Where: "initialized", Data: mustEncode(EncodeInitialized(dcs.Initialized{ClusterID: "x", At: t0})), Version: "3"},
		History:     &Stored{Where: "history", Data: mustEncode(EncodeHistory([]dcs.HistoryEntry{{Kind: dcs.HistoryFailover, To: "m1", At: t0}}))},
	}
	garbage := func(where string) *Stored { return &Stored{Where: where, Data: []byte("{"), Version: "v-" + where} }
	bad := StoredState{Config: garbage("config"), Switchover: garbage("switchover"), Initialized: garbage("initialized"), History: garbage("history")}

	t.Run("absent", func(t *testing.T) {
		c := &dcs.Cluster{Config: fallback}
		DecodeState(c, StoredState{})
		if c.Config != fallback || c.ConfigErr != nil || c.ConfigVersion != "" || c.Switchover != nil || c.Initialized != nil || c.History != nil || c.Problems != nil {
			t.Fatalf("nothing stored: %+v", c)
		}
	})
	t.Run("valid", func(t *testing.T) {
		c := &dcs.Cluster{Config: fallback}
		DecodeState(c, good)
		if c.Config != stored || c.ConfigErr != nil || c.ConfigVersion != "1" || len(c.Problems) != 0 {
			t.Fatalf("config: %+v, err %v, version %q, problems %v", c.Config, c.ConfigErr, c.ConfigVersion, c.Problems)
		}
		if c.Switchover == nil || c.Switchover.To != "m1" || c.Switchover.Version != "2" || c.Switchover.Err != nil {
			t.Fatalf("switchover: %+v", c.Switchover)
		}
		if c.Initialized == nil || c.Initialized.ClusterID != "x" || c.Initialized.Version != "3" || c.Initialized.Err != nil {
			t.Fatalf("initialized: %+v", c.Initialized)
		}
		if len(c.History) != 1 || c.History[0].To != "m1" {
			t.Fatalf("history: %+v", c.History)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		c := &dcs.Cluster{Config: fallback}
		DecodeState(c, bad)
		if len(c.Problems) != 4 {
			t.Fatalf("problems: %v, want one per record", c.Problems)
		}
		for _, p := range c.Problems {
			if !errors.Is(p, dcs.ErrCorrupt) {
				t.Errorf("problem %v does not wrap ErrCorrupt", p)
			}
		}
		if c.Config != fallback || !errors.Is(c.ConfigErr, dcs.ErrCorrupt) || c.ConfigVersion != "v-config" {
			t.Fatalf("config: %+v, err %v, version %q; want the fallback, the error and the stored version", c.Config, c.ConfigErr, c.ConfigVersion)
		}
		if c.Switchover == nil || !errors.Is(c.Switchover.Err, dcs.ErrCorrupt) || c.Switchover.Version != "v-switchover" {
			t.Fatalf("switchover: %+v, want present with Err and its version", c.Switchover)
		}
		if c.Initialized == nil || !errors.Is(c.Initialized.Err, dcs.ErrCorrupt) || c.Initialized.Version != "v-initialized" {
			t.Fatalf("initialized: %+v, want present with Err and its version", c.Initialized)
		}
		if c.History != nil {
			t.Fatalf("history: %+v, want none", c.History)
		}
	})
}
