package record

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestPrepareCreateOnce(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := t0.Add(-time.Hour)

	sw, data, err := PrepareSwitchover(dcs.Switchover{To: "m1", Version: "7", Err: errors.New("x")}, t0)
	if err != nil || !sw.RequestedAt.Equal(t0) || sw.Version != "" || sw.Err != nil {
		t.Fatalf("PrepareSwitchover: %+v, %v; want requested now, read-side fields cleared", sw, err)
	}
	if back, err := DecodeSwitchover("k", data); err != nil || back.To != "m1" || !back.RequestedAt.Equal(t0) {
		t.Fatalf("encoding decodes to %+v, %v", back, err)
	}
	if sw, _, _ := PrepareSwitchover(dcs.Switchover{RequestedAt: earlier}, t0); !sw.RequestedAt.Equal(earlier) {
		t.Fatalf("a given RequestedAt was replaced: %v", sw.RequestedAt)
	}
	if _, _, err := PrepareSwitchover(dcs.Switchover{From: "m1", To: "m1"}, t0); !errors.Is(err, dcs.ErrInvalid) {
		t.Fatalf("switchover to its own source: %v, want ErrInvalid", err)
	}

	in, data, err := PrepareInitialized(dcs.Initialized{ClusterID: "x", Version: "7"}, t0)
	if err != nil || !in.At.Equal(t0) || in.Version != "" {
		t.Fatalf("PrepareInitialized: %+v, %v; want at now, version cleared", in, err)
	}
	if back, err := DecodeInitialized("k", data); err != nil || back.ClusterID != "x" {
		t.Fatalf("encoding decodes to %+v, %v", back, err)
	}
	if _, _, err := PrepareInitialized(dcs.Initialized{}, t0); !errors.Is(err, dcs.ErrInvalid) {
		t.Fatalf("initialized without a cluster id: %v, want ErrInvalid", err)
	}

	for _, err := range []error{SwitchoverExists([]byte(`{"to":"m1"}`)), InitializedExists([]byte(`{"to":"m1"}`))} {
		if !errors.Is(err, dcs.ErrExists) || !strings.Contains(err.Error(), `{"to":"m1"}`) {
			t.Errorf("refusal %v: want ErrExists naming the stored record", err)
		}
	}
}
