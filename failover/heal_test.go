package failover

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

func TestHeal(t *testing.T) {
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	base := HealState{Config: dcs.DefaultConfig(), Flavor: gtid.MariaDB, CanRebuild: true, Leader: "db2", Now: now, Donor: "db3"}
	for _, tc := range []struct {
		name string
		edit func(*HealState)
		kind HealKind
		want string // in the reason
	}{
		{"a healthy member", func(s *HealState) {}, HealNone, ""},
		{"diverged: save first", func(s *HealState) { s.Errant = "0-1-12" }, HealSave, "holds transactions leader db2 lacks (0-1-12); saving them"},
		{"diverged and refused by its source: still save first", func(s *HealState) {
			s.Errant, s.SourcePurgedSince = "0-1-12", now.Add(-time.Hour)
		}, HealSave, "saving them"},
		{"diverged, saved: rebuild", func(s *HealState) { s.Errant, s.Saved = "0-1-12", "/d/mysqlha-saved-x.sql" }, HealRebuild,
			"automatic rebuild from db3: it holds transactions leader db2 lacks (0-1-12); saved to /d/mysqlha-saved-x.sql"},
		{"diverged, the save failed: never rebuild", func(s *HealState) { s.Errant, s.SaveFailed = "0-1-12", "binary log purged" }, HealWait,
			"saving them failed, and they exist nowhere else: binary log purged"},
		{"diverged, policy report", func(s *HealState) { s.Errant, s.Config.RebuildDiverged = "0-1-12", dcs.RebuildReport }, HealWait,
			"rebuild_diverged=report"},
		{"diverged, policy report, even once saved", func(s *HealState) {
			s.Errant, s.Saved, s.Config.RebuildDiverged = "0-1-12", "/d/f", dcs.RebuildReport
		}, HealWait, "rebuild_diverged=report"},
		{"paused", func(s *HealState) { s.Errant, s.Config.Paused = "0-1-12", true }, HealWait, "paused"},
		{"MySQL", func(s *HealState) { s.Errant, s.Flavor = "x", gtid.MySQL }, HealWait, "not implemented"},
		{"no datadir", func(s *HealState) { s.Errant, s.CanRebuild = "0-1-12", false }, HealWait, "--mysql-datadir"},
		{"saved, another rebuild pending", func(s *HealState) { s.Errant, s.Saved, s.Pending = "0-1-12", "/d/f", true }, HealWait,
			"another rebuild is pending"},
		{"saved, no donor", func(s *HealState) { s.Errant, s.Saved, s.DonorErr = "0-1-12", "/d/f", errors.New("db3 lags") }, HealWait,
			"no donor: db3 lags"},
		{"saved, the last rebuild failed a minute ago", func(s *HealState) {
			s.Errant, s.Saved, s.LastRebuildFailed, s.LastRebuildFailedWhy = "0-1-12", "/d/f", now.Add(-time.Minute), "disk full"
		}, HealWait, "the last automatic rebuild failed (disk full); trying again in 4m0s"},
		{"saved, the last rebuild failed long ago", func(s *HealState) {
			s.Errant, s.Saved, s.LastRebuildFailed = "0-1-12", "/d/f", now.Add(-time.Hour)
		}, HealRebuild, "automatic rebuild from db3"},
		{"purged logs, within reseed_after", func(s *HealState) { s.SourcePurgedSince = now.Add(-time.Minute) }, HealWait,
			"error 1236); rebuilding in 4m0s (reseed_after=5m0s)"},
		{"purged logs, past reseed_after", func(s *HealState) { s.SourcePurgedSince = now.Add(-6 * time.Minute) }, HealRebuild,
			"automatic rebuild from db3: its source purged binary logs it needs (error 1236) for 6m0s"},
		{"purged logs, reseed_after 0", func(s *HealState) {
			s.SourcePurgedSince, s.Config.ReseedAfter = now.Add(-time.Hour), 0
		}, HealWait, "reseed_after=0"},
		{"purged logs, no donor", func(s *HealState) {
			s.SourcePurgedSince, s.DonorErr = now.Add(-time.Hour), errors.New("none fit")
		}, HealWait, "no donor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			got := Heal(s)
			if got.Kind != tc.kind || !strings.Contains(got.Reason, tc.want) {
				t.Fatalf("Heal = %+v, want kind %d with %q", got, tc.kind, tc.want)
			}
			if got.Kind == HealRebuild && got.Donor != s.Donor {
				t.Fatalf("rebuild from %q, want %q", got.Donor, s.Donor)
			}
		})
	}
}
