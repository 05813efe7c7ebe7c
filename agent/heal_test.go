package agent

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/salvage"
)

// BinaryLogFiles lets the fake serve a save (heal.go).
func (d *fakeDB) BinaryLogFiles(context.Context) ([]string, error) {
	return []string{"/data/" + d.name + "-bin.000001"}, nil
}

// stubRebuilder stands for backup.Local: nothing here runs a rebuild.
type stubRebuilder struct{}

func (stubRebuilder) Stream(context.Context, io.Writer) error          { return nil }
func (stubRebuilder) Stage(context.Context, io.Reader) (string, error) { return "", nil }
func (stubRebuilder) BeginSwap() error                                 { return nil }
func (stubRebuilder) Swap() error                                      { return nil }
func (stubRebuilder) SwapPending() bool                                { return false }
func (stubRebuilder) Discard() error                                   { return nil }
func (stubRebuilder) Position() (string, error)                        { return "", nil }

// fakeSaver records the saves asked of it and answers with err, or a file.
type fakeSaver struct {
	calls []salvage.SaveOptions
	err   error
}

func (f *fakeSaver) save(_ context.Context, o salvage.SaveOptions) (salvage.Saved, error) {
	f.calls = append(f.calls, o)
	if f.err != nil {
		return salvage.Saved{}, f.err
	}
	return salvage.Saved{Path: "/data/mysqlha-saved-x-" + o.Member + ".sql", Count: 5, GTIDs: "0-2-2..0-2-6 (5)"}, nil
}

// divergedHarness: db1 leads, db2 committed 5 transactions of its own and
// its agent can save and rebuild; db2's fetch of a backup always fails.
func divergedHarness(t *testing.T, config dcs.Config) (*loopHarness, *fakeSaver) {
	h := newLoopHarnessWith(t, config, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	d := h.mysql.byName("db2")
	d.source, d.ioRunning = "", false
	d.commit(5)
	saver := &fakeSaver{}
	a := h.agents["db2"]
	a.rebuilder, a.saveTxns = stubRebuilder{}, saver.save
	a.fetchClone = func(context.Context, string, string) (io.ReadCloser, error) { return nil, errors.New("no donor here") }
	return h, saver
}

func (h *loopHarness) reinitRequest() *dcs.Reinit {
	cl, err := h.agents["db1"].store.Cluster(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return cl.Reinit
}

// A diverged member saves what the leader lacks, and only then asks for
// its own rebuild, naming the file; a failed save asks for nothing and is
// tried again a minute later; a failed rebuild waits RebuildRetry.
func TestLoopDivergedMemberSavesBeforeItsRebuild(t *testing.T) {
	h, saver := divergedHarness(t, dcs.DefaultConfig())
	saver.err = errors.New("mariadb-binlog not found")
	h.round()
	h.round()
	a := h.agents["db2"]
	if a.errant == "" || len(saver.calls) != 1 || h.reinitRequest() != nil {
		t.Fatalf("errant %q, %d saves, request %+v: want one failed save and no request", a.errant, len(saver.calls), h.reinitRequest())
	}
	if got := a.healing.reason; !strings.Contains(got, "saving them failed, and they exist nowhere else: mariadb-binlog not found") {
		t.Fatalf("healing reason %q", got)
	}
	if o := saver.calls[0]; o.Leader != "db1" || o.Cluster != "test" || o.Member != "db2" || len(o.Files) != 1 || o.Want == nil {
		t.Fatalf("save asked with %+v", o)
	}
	h.advance(30*time.Second, "db1", "db2", "db3")
	if len(saver.calls) != 1 {
		t.Fatalf("%d saves within a minute of a failed one", len(saver.calls))
	}

	saver.err = nil
	h.advance(31*time.Second, "db1", "db2", "db3")
	req := h.reinitRequest()
	if len(saver.calls) != 2 || req == nil || req.Member != "db2" ||
		!strings.Contains(req.Reason, "automatic rebuild from ") || !strings.Contains(req.Reason, "saved to /data/mysqlha-saved-x-db2.sql") {
		t.Fatalf("after a good save: %d saves, request %+v", len(saver.calls), req)
	}
	wantGauge(t, "saved_transactions_total", a.metrics.SavedTransactions, 5)
	wantGauge(t, "automatic_rebuilds_total", a.metrics.AutoRebuilds, 1)

	// The rebuild fails (no backup): recorded with its reason, and not
	// asked for again at once. The rebuild runs in a goroutine of its
	// own, so its end is awaited in real time: three rounds alone lost
	// that race about once in 50 runs.
	for deadline := time.Now().Add(10 * time.Second); h.reinitRequest() != nil && time.Now().Before(deadline); {
		h.round()
		time.Sleep(time.Millisecond)
	}
	if req := h.reinitRequest(); req != nil {
		t.Fatalf("the failed rebuild's request was not cleared: %+v", req)
	}
	cl, _ := a.store.Cluster(h.ctx)
	last := cl.History[len(cl.History)-1]
	if last.Kind != dcs.HistoryReinit || !strings.HasPrefix(last.Reason, "automatic rebuild from ") || !strings.Contains(last.Reason, ": failed: ") {
		t.Fatalf("history %+v", last)
	}
	h.advance(10*time.Second, "db1", "db2", "db3")
	if req := h.reinitRequest(); req != nil || !strings.Contains(a.healing.reason, "the last automatic rebuild failed") {
		t.Fatalf("asked again within RebuildRetry: %+v, healing %q", req, a.healing.reason)
	}
	if len(saver.calls) != 2 {
		t.Fatalf("saved again (%d saves) although the errant set did not change", len(saver.calls))
	}
}

// rebuild_diverged=report: nothing saved, nothing rebuilt, and it says so.
func TestLoopDivergedMemberReportOnly(t *testing.T) {
	cfg := dcs.DefaultConfig()
	cfg.RebuildDiverged = dcs.RebuildReport
	h, saver := divergedHarness(t, cfg)
	h.advance(5*time.Second, "db1", "db2", "db3")
	a := h.agents["db2"]
	if len(saver.calls) != 0 || h.reinitRequest() != nil || !strings.Contains(a.healing.reason, "rebuild_diverged=report") {
		t.Fatalf("%d saves, request %+v, healing %q", len(saver.calls), h.reinitRequest(), a.healing.reason)
	}
	wantGauge(t, "rebuild_needed", a.metrics.RebuildNeeded, 1)
}

// A replica whose source purged the binary logs it needs is rebuilt once
// reseed_after has passed, not before, and nothing is saved.
func TestLoopReplicaRefusedItsBinlogsIsReseeded(t *testing.T) {
	cfg := dcs.DefaultConfig()
	cfg.ReseedAfter = time.Minute
	h := newLoopHarnessWith(t, cfg, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	a := h.agents["db3"]
	saver := &fakeSaver{}
	a.rebuilder, a.saveTxns = stubRebuilder{}, saver.save
	// The fetch waits, so the request is still there to be read: a fetch
	// that failed at once would clear it within the same advance.
	a.fetchClone = func(ctx context.Context, _, _ string) (io.ReadCloser, error) { <-ctx.Done(); return nil, ctx.Err() }
	d := h.mysql.byName("db3")
	d.c.mu.Lock()
	d.ioRunning, d.ioErrno = false, erSourcePurged
	d.c.mu.Unlock()
	h.advance(50*time.Second, "db1", "db3")
	if req := h.reinitRequest(); req != nil || !strings.Contains(a.healing.reason, "rebuilding in") {
		t.Fatalf("within reseed_after: request %+v, healing %q", req, a.healing.reason)
	}
	h.advance(15*time.Second, "db1", "db3")
	req := h.reinitRequest()
	if req == nil || req.Member != "db3" || !strings.Contains(req.Reason, "purged binary logs it needs (error 1236) for 1m") || len(saver.calls) != 0 {
		t.Fatalf("past reseed_after: request %+v, %d saves", req, len(saver.calls))
	}
}
