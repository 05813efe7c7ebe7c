package dcs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// TestSettingsRoundTrip: every setting's shown value sets it back.
func TestSettingsRoundTrip(t *testing.T) {
	c := dcs.Config{TTL: 12 * time.Second, LoopWait: 1500 * time.Millisecond, RetryTimeout: 2 * time.Second,
		SafetyMargin: 0, MaximumLagOnFailover: time.Minute, MaximumLagForReads: 10 * time.Second, SemiSync: dcs.SemiSyncStrict, Paused: true, Failsafe: true,
		RebuildDiverged: dcs.RebuildReport, ReseedAfter: 90 * time.Second, Fenced: "db1,db3"}
	var back dcs.Config
	for _, s := range c.Settings() {
		if err := back.Set(s.Key, fmt.Sprint(s.Value)); err != nil {
			t.Fatalf("Set(%s, %v): %v", s.Key, s.Value, err)
		}
	}
	if back != c {
		t.Fatalf("round trip gave %+v, want %+v", back, c)
	}
	if got := strings.Join(dcs.SettingKeys(), ","); got != "ttl,loop_wait,retry_timeout,safety_margin,maximum_lag_on_failover,maximum_lag_for_reads,semi_sync,rebuild_diverged,reseed_after,failsafe_mode,paused,fenced" {
		t.Fatalf("SettingKeys() = %s", got)
	}
}

func TestSetRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"tll", "5s", `unknown config key "tll"; the keys are ttl, loop_wait,`},
		{"ttl", "5", "ttl=5 is not a duration; write it with a unit, like 500ms, 5s or 1m30s"},
		{"loop_wait", "fast", "loop_wait=fast is not a duration"},
		{"semi_sync", "always", `semi_sync=always: dcs: invalid argument: unknown semi-sync mode "always"`},
		{"paused", "maybe", "paused=maybe: want true or false"},
		{"rebuild_diverged", "always", `rebuild_diverged=always: dcs: invalid argument: unknown rebuild_diverged policy "always" (want one of [auto report])`},
		{"reseed_after", "5", "reseed_after=5 is not a duration"},
		{"fenced", "db1,db 2", `fenced=db1,db 2: "db 2" is not a member name`},
	} {
		c := dcs.DefaultConfig()
		err := c.Set(tc.key, tc.value)
		if !errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set(%s, %s) = %v, want ErrInvalid containing %q", tc.key, tc.value, err, tc.want)
		}
		if c != dcs.DefaultConfig() {
			t.Errorf("Set(%s, %s) changed the config although it failed: %+v", tc.key, tc.value, c)
		}
	}
}

func TestChanges(t *testing.T) {
	old := dcs.DefaultConfig()
	next := old
	next.TTL, next.Failsafe = 10*time.Second, true
	if got := strings.Join(old.Changes(next), "; "); got != "ttl: 5s -> 10s; failsafe_mode: false -> true" {
		t.Fatalf("Changes = %q", got)
	}
	if got := old.Changes(old); len(got) != 0 {
		t.Fatalf("no change listed as %v", got)
	}
}

// The fenced list is kept sorted and unique, whatever order it was given
// in; Validate refuses a list in another form, as a hand-edited record.
func TestFencedList(t *testing.T) {
	var c dcs.Config
	if err := c.Set("fenced", " db3, db1,,db3 "); err != nil || c.Fenced != "db1,db3" {
		t.Fatalf("Set(fenced): %q, %v; want db1,db3", c.Fenced, err)
	}
	if !c.IsFenced("db1") || !c.IsFenced("db3") || c.IsFenced("db2") || c.IsFenced("") || c.IsFenced("db") {
		t.Errorf("IsFenced wrong for %q", c.Fenced)
	}
	if got := c.WithFenced("db2", true).Fenced; got != "db1,db2,db3" {
		t.Errorf("WithFenced(db2, on) = %q", got)
	}
	if got := c.WithFenced("db1", false).WithFenced("db3", false).Fenced; got != "" {
		t.Errorf("unfencing both left %q", got)
	}
	bad := dcs.DefaultConfig()
	bad.Fenced = "db3,db1"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "canonical") {
		t.Errorf("Validate of an unsorted list: %v", err)
	}
}
