package dcstest

import (
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// The cluster config: compare-and-set on its version, and a change written
// with its history entry at once.

func testConfig(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	cfg := dcs.Config{
		TTL: 10 * time.Second, LoopWait: 2 * time.Second, RetryTimeout: 1500 * time.Millisecond,
		SafetyMargin: 2 * time.Second, MaximumLagOnFailover: 45 * time.Second,
		SemiSync: dcs.SemiSyncStrict, Paused: true, Failsafe: true,
	}
	must(t, "create config", a.SetConfig(ctxT(t), cfg, ""))
	mustIs(t, "create config again", b.SetConfig(ctxT(t), cfg, ""), dcs.ErrConflict)
	c := waitFor(t, b, "config stored", func(c *dcs.Cluster) bool { return c.ConfigVersion != "" })
	if c.Config != cfg {
		t.Fatalf("config read as %+v, want %+v", c.Config, cfg)
	}
	v1 := c.ConfigVersion
	cfg2 := cfg
	cfg2.Paused = false
	must(t, "update config", b.SetConfig(ctxT(t), cfg2, v1))
	mustIs(t, "update with a stale version", a.SetConfig(ctxT(t), cfg, v1), dcs.ErrConflict)
	c = waitFor(t, a, "config updated", func(c *dcs.Cluster) bool { return c.ConfigVersion != v1 && c.ConfigVersion != "" })
	if c.Config != cfg2 {
		t.Fatalf("config read as %+v, want %+v", c.Config, cfg2)
	}
	bad := cfg2
	bad.LoopWait = 9 * time.Second
	err := a.SetConfig(ctxT(t), bad, c.ConfigVersion)
	mustIs(t, "invalid config", err, dcs.ErrInvalid)
	if !strings.Contains(err.Error(), "loop_wait + 2*retry_timeout <= ttl - safety_margin") {
		t.Fatalf("error does not state the timing rule: %v", err)
	}
}

// testChangeConfig: a config change and its history entry land together
// or not at all; a concurrent history append does not make it fail.
func testChangeConfig(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(reason string) dcs.HistoryEntry {
		return dcs.HistoryEntry{Kind: dcs.HistoryConfig, At: at, Reason: reason}
	}
	cfg1 := dcs.DefaultConfig()
	cfg1.TTL = 10 * time.Second
	must(t, "first change", a.ChangeConfig(ctxT(t), cfg1, "", entry("ttl: 5s -> 10s")))
	mustIs(t, "a change on a stale version", b.ChangeConfig(ctxT(t), dcs.DefaultConfig(), "", entry("stale")), dcs.ErrConflict)
	v1 := waitFor(t, b, "the first change", func(c *dcs.Cluster) bool { return c.ConfigVersion != "" && len(c.History) == 1 }).ConfigVersion

	// Another member's failover lands in the history in between: the
	// config's version is unchanged, so the change goes through.
	must(t, "a failover entry", c.AppendHistory(ctxT(t), dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: "m0", To: "m2", At: at}))
	waitFor(t, b, "the failover entry", func(c *dcs.Cluster) bool { return len(c.History) == 2 })
	cfg2 := cfg1
	cfg2.LoopWait, cfg2.SemiSync = 2*time.Second, dcs.SemiSyncOn
	must(t, "second change", b.ChangeConfig(ctxT(t), cfg2, v1, entry("loop_wait: 1s -> 2s, semi_sync: off -> on")))

	bad := cfg2
	bad.LoopWait = bad.TTL
	mustIs(t, "an invalid config", b.ChangeConfig(ctxT(t), bad, v1, entry("x")), dcs.ErrInvalid)
	mustIs(t, "an entry naming members", b.ChangeConfig(ctxT(t), cfg2, v1, dcs.HistoryEntry{Kind: dcs.HistoryConfig, To: "m1", At: at, Reason: "x"}), dcs.ErrInvalid)
	mustIs(t, "an entry without its changes", b.ChangeConfig(ctxT(t), cfg2, v1, entry("")), dcs.ErrInvalid)
	mustIs(t, "a change on the replaced version", a.ChangeConfig(ctxT(t), cfg1, v1, entry("lost")), dcs.ErrConflict)

	got := waitFor(t, a, "the second change", func(c *dcs.Cluster) bool { return c.ConfigVersion != v1 && len(c.History) == 3 })
	if got.Config != cfg2 {
		t.Fatalf("config read as %+v, want %+v", got.Config, cfg2)
	}
	var kinds, reasons []string
	for _, h := range got.History {
		kinds, reasons = append(kinds, h.Kind.String()), append(reasons, h.Reason)
	}
	if strings.Join(kinds, ",") != "config,failover,config" || reasons[2] != "loop_wait: 1s -> 2s, semi_sync: off -> on" || got.History[2].To != "" {
		t.Fatalf("history %v %q, want config, failover, config with the changes as reasons and no members", kinds, reasons)
	}
}
