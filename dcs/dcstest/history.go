package dcstest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// The initialize key (created once) and the bounded failover history.

func testInitialized(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	in := dcs.Initialized{ClusterID: "3e11fa47-71ca-11e1-9e33-c80aa9429562", FirstGTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", Bootstrapper: "m0"}
	must(t, "initialize", a.SetInitialized(ctxT(t), in))
	err := b.SetInitialized(ctxT(t), dcs.Initialized{ClusterID: "other"})
	mustIs(t, "initialize again", err, dcs.ErrExists)
	c := waitFor(t, b, "initialized", func(c *dcs.Cluster) bool { return c.Initialized != nil })
	got := *c.Initialized
	if got.ClusterID != in.ClusterID || got.FirstGTID != in.FirstGTID || got.Bootstrapper != "m0" || got.At.IsZero() || got.Version == "" || got.Err != nil {
		t.Fatalf("initialized read as %+v", got)
	}
	mustIs(t, "initialize without an id", b.SetInitialized(ctxT(t), dcs.Initialized{}), dcs.ErrInvalid)
}

func testHistory(t *testing.T, e *Env) {
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(i int) dcs.HistoryEntry {
		return dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: "m0", To: "m1", At: at.Add(time.Duration(i) * time.Second), Reason: fmt.Sprint(i), WriteUnavailable: time.Duration(i) * time.Millisecond}
	}
	// Concurrent appends from all members all land.
	var wg sync.WaitGroup
	errs := make([]error, len(e.Stores))
	for i, s := range e.Stores {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.AppendHistory(ctxT(t), entry(i)) }()
	}
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("%s appends", name(i)), err)
	}
	c := waitFor(t, e.Stores[0], "3 history entries", func(c *dcs.Cluster) bool { return len(c.History) == len(e.Stores) })
	seen := map[string]bool{}
	for _, h := range c.History {
		seen[h.Reason] = true
	}
	if len(seen) != len(e.Stores) {
		t.Fatalf("concurrent appends lost entries: %+v", c.History)
	}
	sw := dcs.HistoryEntry{Kind: dcs.HistorySwitchover, From: "m1", To: "m2", At: at.Add(time.Hour), Reason: "planned", WriteUnavailable: 1234 * time.Millisecond}
	must(t, "append switchover", e.Stores[1].AppendHistory(ctxT(t), sw))
	c = waitFor(t, e.Stores[2], "switchover in history", func(c *dcs.Cluster) bool { return len(c.History) == len(e.Stores)+1 })
	if got := c.History[len(c.History)-1]; got.Kind != sw.Kind || got.From != sw.From || got.To != sw.To || !got.At.Equal(sw.At) || got.Reason != sw.Reason || got.WriteUnavailable != sw.WriteUnavailable {
		t.Fatalf("newest entry read as %+v, want %+v", got, sw)
	}
	for i := 0; i < dcs.MaxHistory; i++ {
		must(t, "append", e.Stores[0].AppendHistory(ctxT(t), entry(1000+i)))
	}
	c = waitFor(t, e.Stores[1], "history full", func(c *dcs.Cluster) bool {
		return len(c.History) > 0 && c.History[len(c.History)-1].Reason == fmt.Sprint(1000+dcs.MaxHistory-1)
	})
	if len(c.History) != dcs.MaxHistory || c.History[0].Reason != "1000" {
		t.Fatalf("history not bounded to the newest %d: %d entries, oldest %q", dcs.MaxHistory, len(c.History), c.History[0].Reason)
	}
	mustIs(t, "invalid entry", e.Stores[0].AppendHistory(ctxT(t), dcs.HistoryEntry{To: "m1", At: at}), dcs.ErrInvalid)
}
