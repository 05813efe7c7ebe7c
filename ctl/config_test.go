package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mysqlha/mysqlha/dcs"
)

func TestShowConfig(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.ShowConfig(ctx, Table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KEY", "ttl                      5s", "loop_wait                1s", "semi_sync                off",
		"failsafe_mode            false", "paused                   false", "Not stored yet: the defaults"} {
		if !strings.Contains(f.out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, f.out)
		}
	}
	stored := dcs.DefaultConfig()
	stored.TTL, stored.SemiSync, stored.Failsafe = 12*time.Second, dcs.SemiSyncStrict, true
	if err := f.stores["db1"].SetConfig(ctx, stored, ""); err != nil {
		t.Fatal(err)
	}
	f.out.Reset()
	if err := f.cli.ShowConfig(ctx, JSON); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(f.out.String()), " ")
	want := `{ "ttl": "12s", "loop_wait": "1s", "retry_timeout": "1s", "safety_margin": "1s", "maximum_lag_on_failover": "30s", "maximum_lag_for_reads": "30s", ` +
		`"semi_sync": "strict", "rebuild_diverged": "auto", "reseed_after": "5m0s", "failsafe_mode": true, "paused": false, "fenced": "" }`
	if got != want {
		t.Fatalf("JSON:\n%s\nwant\n%s", got, want)
	}
	f.out.Reset()
	if err := f.cli.ShowConfig(ctx, YAML); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := yaml.Unmarshal(f.out.Bytes(), &back); err != nil || back["semi_sync"] != "strict" || back["ttl"] != "12s" || back["failsafe_mode"] != true {
		t.Fatalf("YAML %s: %v, %v", f.out, back, err)
	}
}

// storedConfig returns the stored config, its version and the history.
func storedConfig(t *testing.T, f *fixture) (dcs.Config, string, []dcs.HistoryEntry) {
	cl := mustCluster(t, f)
	return cl.Config, cl.ConfigVersion, cl.History
}

func TestSetConfigAppliesAndRecords(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.SetConfig(ctx, []string{"ttl=10s", "loop_wait=2s", "semi_sync=on"}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "Changed the cluster config: ttl: 5s -> 10s, loop_wait: 1s -> 2s, semi_sync: off -> on.") {
		t.Fatalf("output:\n%s", f.out)
	}
	cfg, _, hist := storedConfig(t, f)
	want := dcs.DefaultConfig()
	want.TTL, want.LoopWait, want.SemiSync = 10*time.Second, 2*time.Second, dcs.SemiSyncOn
	if cfg != want {
		t.Fatalf("stored %+v, want %+v", cfg, want)
	}
	if len(hist) != 1 || hist[0].Kind != dcs.HistoryConfig || hist[0].Reason != "ttl: 5s -> 10s, loop_wait: 1s -> 2s, semi_sync: off -> on" {
		t.Fatalf("history %+v", hist)
	}
	f.out.Reset()
	if err := f.cli.History(ctx, Table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "config  -     -   ttl: 5s -> 10s, loop_wait: 1s -> 2s, semi_sync: off -> on") {
		t.Fatalf("history table:\n%s", f.out)
	}

	// The same values again: nothing to write, nothing recorded.
	f.out.Reset()
	if err := f.cli.SetConfig(ctx, []string{"ttl=10s"}, false); err != nil || !strings.Contains(f.out.String(), "No change") {
		t.Fatalf("no-op: %v\n%s", err, f.out)
	}
	if _, _, h := storedConfig(t, f); len(h) != 1 {
		t.Fatalf("a no-op was recorded: %+v", h)
	}
}

// Bad input is refused with the exit code of a usage error and a message
// naming the problem and its fix; nothing of it is applied.
func TestSetConfigRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.SetConfig(ctx, []string{"ttl=10s"}, false); err != nil {
		t.Fatal(err)
	}
	before, version, hist := storedConfig(t, f)

	impossible := before
	impossible.LoopWait = 9 * time.Second
	startup := impossible.Validate() // what an agent started with these timings says
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "set-config needs at least one key=value; the keys are ttl, loop_wait"},
		{[]string{"ttl"}, `"ttl": want key=value, such as ttl=10s`},
		{[]string{"loop_wait=2s", "tll=5s"}, `unknown config key "tll"; the keys are ttl, loop_wait, retry_timeout`},
		{[]string{"loop_wait=2"}, "loop_wait=2 is not a duration; write it with a unit, like 500ms, 5s or 1m30s"},
		{[]string{"semi_sync=always"}, `unknown semi-sync mode "always" (want one of [off on strict])`},
		{[]string{"ttl=20s", "ttl=30s"}, "ttl is given twice"},
		{[]string{"ttl=12s", "loop_wait=10s"}, "loop_wait + 2*retry_timeout <= ttl - safety_margin must hold"},
		{[]string{"loop_wait=9s"}, startup.Error()},
		{[]string{"loop_wait=10s"}, "got 10s + 2*1s = 12s > 10s - 1s = 9s; raise ttl or lower loop_wait/retry_timeout"},
		{[]string{"ttl=1500ms"}, "ttl must be a whole number of seconds"},
	} {
		err := f.cli.SetConfig(ctx, tc.args, false)
		exitCode(t, err, ExitUsage)
		if !strings.Contains(err.Error(), tc.want) || (len(tc.args) > 0 && !strings.Contains(err.Error(), "nothing was changed")) {
			t.Errorf("set-config %v: %v\nwant it to contain %q and say nothing was changed", tc.args, err, tc.want)
		}
	}
	if cfg, v, h := storedConfig(t, f); cfg != before || v != version || len(h) != len(hist) {
		t.Fatalf("refused changes were applied: %+v (version %s -> %s), history %d -> %d", cfg, version, v, len(hist), len(h))
	}
}

// racingStore lets another writer change the config between agentctl's
// read and its compare-and-set.
type racingStore struct {
	Store
	race func()
}

func (r racingStore) ChangeConfig(ctx context.Context, cfg dcs.Config, version string, e dcs.HistoryEntry) error {
	r.race()
	return r.Store.ChangeConfig(ctx, cfg, version, e)
}

func TestSetConfigConcurrentChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other := dcs.DefaultConfig()
	other.Failsafe = true
	f.cli.Store = racingStore{Store: f.stores["agentctl"], race: func() {
		if err := f.stores["db2"].SetConfig(ctx, other, mustCluster(t, f).ConfigVersion); err != nil {
			t.Fatal(err)
		}
	}}
	err := f.cli.SetConfig(ctx, []string{"ttl=10s"}, false)
	exitCode(t, err, ExitRejected)
	if !strings.Contains(err.Error(), "the cluster config changed while agentctl was changing it") || !strings.Contains(err.Error(), "run the command again") {
		t.Fatalf("conflict message: %v", err)
	}
	if cfg, _, h := storedConfig(t, f); cfg != other || len(h) != 0 {
		t.Fatalf("after the lost race: %+v, history %+v; want the other writer's config and no entry", cfg, h)
	}
}

// unreadableStore reports the stored config as unreadable.
type unreadableStore struct{ Store }

func (u unreadableStore) Cluster(ctx context.Context) (*dcs.Cluster, error) {
	cl, err := u.Store.Cluster(ctx)
	if err == nil {
		cl.ConfigErr = errors.New("dcs: corrupt record: config is not valid JSON")
	}
	return cl, err
}

func TestUnreadableConfig(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.cli.Store = unreadableStore{f.stores["agentctl"]}
	exitCode(t, f.cli.ShowConfig(ctx, Table), ExitError)
	err := f.cli.SetConfig(ctx, []string{"ttl=10s"}, false)
	exitCode(t, err, ExitRejected)
	if !strings.Contains(err.Error(), "config is not valid JSON") || !strings.Contains(err.Error(), "agentctl edit-config") {
		t.Fatalf("message: %v", err)
	}
	// edit-config replaces it, starting from the defaults.
	f.cli.Editor = func(string) error { return nil }
	if err := f.cli.EditConfig(ctx, true, false); err != nil {
		t.Fatal(err)
	}
	if _, v, h := storedConfig(t, f); v == "" || len(h) != 1 || h[0].Reason != "replaced an unreadable config with the defaults" {
		t.Fatalf("replacement: version %q, history %+v", v, h)
	}
}

// editor returns an Editor that replaces old by new in the file.
func editor(t *testing.T, old, new string) func(string) error {
	return func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), old) {
			t.Errorf("the file to edit lacks %q:\n%s", old, b)
		}
		return os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600)
	}
}

func TestEditConfig(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	exitCode(t, f.cli.EditConfig(ctx, true, false), ExitUsage) // no editor

	f.cli.Editor = editor(t, `ttl: "5s"`, `ttl: "10s"  # longer`)
	exitCode(t, f.cli.EditConfig(ctx, false, false), ExitAborted) // "no" at the prompt
	if _, v, _ := storedConfig(t, f); v != "" {
		t.Fatal("an aborted edit was applied")
	}
	f.cli.In = strings.NewReader("y\n")
	if err := f.cli.EditConfig(ctx, false, false); err != nil {
		t.Fatal(err)
	}
	if cfg, _, h := storedConfig(t, f); cfg.TTL != 10*time.Second || len(h) != 1 || h[0].Reason != "ttl: 5s -> 10s" {
		t.Fatalf("after the edit: %+v, history %+v", cfg, h)
	}

	f.cli.Editor = editor(t, `semi_sync: "off"`, "semi_sync: on\nloop_wait 2s")
	err := f.cli.EditConfig(ctx, true, false)
	exitCode(t, err, ExitUsage)
	if !strings.Contains(err.Error(), `line 10: "loop_wait 2s  # off, on`) {
		t.Fatalf("bad line: %v", err)
	}
	f.cli.Editor = editor(t, `loop_wait: "1s"`, `loop_wait: "10s"`)
	exitCode(t, f.cli.EditConfig(ctx, true, false), ExitUsage) // loop_wait + 2*retry_timeout > ttl - safety_margin
	f.cli.Editor = func(string) error { return errors.New("exit status 1") }
	exitCode(t, f.cli.EditConfig(ctx, true, false), ExitAborted)
	f.cli.Editor = editor(t, `paused: false`, `paused: false`)
	f.out.Reset()
	if err := f.cli.EditConfig(ctx, true, false); err != nil || !strings.Contains(f.out.String(), "No change") {
		t.Fatalf("unchanged edit: %v\n%s", err, f.out)
	}
	if _, _, h := storedConfig(t, f); len(h) != 1 {
		t.Fatalf("refused or empty edits were recorded: %+v", h)
	}
}

func TestSettingLine(t *testing.T) {
	for line, want := range map[string][2]string{
		"":                               {"", ""},
		"  # comment":                    {"", ""},
		`ttl: "5s"  # how long`:          {"ttl", "5s"},
		"ttl: 5s # how long":             {"ttl", "5s"},
		`semi_sync: "off" # "quoted" #`:  {"semi_sync", "off"},
		"paused:true":                    {"paused", "true"},
		`maximum_lag_on_failover: "1m"`:  {"maximum_lag_on_failover", "1m"},
		`maximum_lag_on_failover:   1m `: {"maximum_lag_on_failover", "1m"},
	} {
		k, v, err := settingLine(line)
		if err != nil || k != want[0] || v != want[1] {
			t.Errorf("settingLine(%q) = %q, %q, %v; want %q, %q", line, k, v, err, want[0], want[1])
		}
	}
	for _, bad := range []string{"ttl 5s", `ttl: "5s`} {
		if _, _, err := settingLine(bad); err == nil {
			t.Errorf("settingLine(%q) accepted", bad)
		}
	}
	var v ConfigView = dcs.DefaultConfig().Settings()
	if b, err := json.Marshal(v); err != nil || !json.Valid(b) {
		t.Fatalf("ConfigView JSON %s: %v", b, err)
	}
}
