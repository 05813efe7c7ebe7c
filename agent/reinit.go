package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/internal/apitls"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// A rebuild (agentctl reinit) replaces a member's data with a donor's
// backup. The target's agent runs it in a goroutine the loop starts and
// polls, so the loop keeps serving /healthz and its member record while a
// backup of any size streams; the loop does nothing else with mysqld in the
// meantime (the member holds no lock, and stays read-only).
//
// Steps, each safe to repeat after a crash: fetch the donor's stream (GET
// /clone) into a staging directory and prepare it; write the marker (a
// supervisor must not start mysqld while it exists); SHUTDOWN and wait for
// the pid file to go; swap; wait for the supervisor to start mysqld; set
// the replica position from the backup, with the binlog state the donor had
// there (MariaDB). Then the loop clears the request,
// records the outcome in the history, and follows the leader again. A crash
// before the marker restarts from the fetch (the staging is discarded); after
// it, from the shutdown (Swap resumes).

// Rebuilder is the local, file-level side of a rebuild (package backup's
// Local); nil disables agentctl reinit on this member, as target and donor.
type Rebuilder interface {
	Stream(ctx context.Context, w io.Writer) error
	Stage(ctx context.Context, r io.Reader) (gtidPos string, err error)
	BeginSwap() error
	Swap() error
	SwapPending() bool
	Discard() error
	Position() (gtidPos string, err error)
}

// FetchClone opens a donor's backup stream: GET <apiURL>/clone?member=
// <target>. The body fails with an error, not io.EOF, when the donor's
// backup failed part-way.
type FetchClone func(ctx context.Context, apiURL, target string) (io.ReadCloser, error)

// rebuildDB is what a rebuild does to the local mysqld beyond Database.
type rebuildDB interface {
	Shutdown(ctx context.Context) error
	SetReplicaPosition(ctx context.Context, gtidPos, binlogState string) error
}

// rebuildWait bounds each wait on mysqld (down after SHUTDOWN, up after the
// swap): a large buffer pool takes a while to flush.
const rebuildWait = 15 * time.Minute

// cloneStatusTrailer carries "ok" or the donor's error after the stream.
const cloneStatusTrailer = "X-Mysqlha-Clone-Status"

type rebuildRun struct {
	version string // of the request being served
	donor   string
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // set before done closes
}

// handleReinit serves a reinit request naming this member; it reports
// whether the loop must leave mysqld alone in this iteration.
func (a *Agent) handleReinit(ctx context.Context, cl *dcs.Cluster) bool {
	req := cl.Reinit
	if run := a.rebuild; run != nil && (req == nil || req.Version != run.version) {
		// The request was cleared (agentctl reinit --cancel) or replaced.
		select {
		case <-run.done:
			a.rebuild = nil
		default:
			if a.rebuilder.SwapPending() {
				return true // past the point of no return: finish it
			}
			run.cancel()
			<-run.done
			a.rebuild = nil
			a.rebuilder.Discard()
			a.log.Info("reinit request withdrawn; rebuild stopped")
		}
	}
	if req == nil || req.Err != nil || req.Member != a.self.Name {
		return a.rebuild != nil
	}
	if run := a.rebuild; run != nil {
		select {
		case <-run.done:
		default:
			return true
		}
		a.rebuild = nil
		a.finishReinit(ctx, req, run.donor, run.err)
		return false
	}
	if reason := a.refuseReinit(cl); reason != "" {
		a.finishReinit(ctx, req, req.Donor, errors.New(reason))
		return false
	}
	donor, err := failover.ReinitDonor(cl, a.self.Name, req.Donor)
	if err != nil {
		a.finishReinit(ctx, req, req.Donor, err)
		return false
	}
	rctx, cancel := context.WithCancel(ctx)
	run := &rebuildRun{version: req.Version, donor: donor.Name, cancel: cancel, done: make(chan struct{})}
	a.rebuild = run
	pidFile := a.pidFile
	a.log.Info("rebuilding from donor", zap.String("donor", donor.Name), zap.String("donor_api", donor.APIURL))
	a.labeler.Event(ctx, a.self.Name, eventNormal, "ReinitStarted", "rebuilding from donor "+donor.Name)
	go func() {
		defer close(run.done)
		run.err = a.runRebuild(rctx, donor, pidFile)
	}()
	return true
}

// refuseReinit says why this member must not be rebuilt now; "" when it may.
func (a *Agent) refuseReinit(cl *dcs.Cluster) string {
	flavor := gtid.MariaDB // unknown until mysqld answers: the rebuild's own steps find out
	if a.db != nil {
		flavor = a.flavor()
	}
	return failover.ReinitRefusal(failover.ReinitTarget{
		CanRebuild: a.rebuilder != nil,
		HoldsLock:  a.hasDeadline() || cl.Leader != nil && cl.Leader.Holder == a.self.Name,
		Flavor:     flavor,
	})
}

// finishReinit clears the request and records the outcome.
func (a *Agent) finishReinit(ctx context.Context, req *dcs.Reinit, donor string, runErr error) {
	reason, level, event := "done", eventNormal, "ReinitDone"
	if runErr != nil {
		reason, level, event = "failed: "+runErr.Error(), eventWarning, "ReinitFailed"
		a.log.Error("rebuild failed", zap.String("donor", donor), zap.Error(runErr))
		if req.Reason != "" {
			a.healing.rebuildFailedAt, a.healing.rebuildFailedWhy = a.clock.Now(), runErr.Error()
		}
	} else {
		a.log.Info("rebuild done; following the leader", zap.String("donor", donor))
	}
	a.labeler.Event(ctx, a.self.Name, level, event, reason)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	from := donor
	if dcs.ValidateName("donor", from) != nil {
		from = ""
	}
	if req.Reason != "" {
		reason = req.Reason + ": " + reason
	}
	if err := a.store.AppendHistory(cctx, dcs.HistoryEntry{Kind: dcs.HistoryReinit, From: from, To: a.self.Name, At: a.clock.Now(), Reason: reason}); err != nil {
		a.log.Warn("recording the rebuild in the history failed", zap.Error(err))
	}
	if err := a.store.ClearReinit(cctx, req.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the reinit request failed", zap.Error(err))
	}
}

func (a *Agent) runRebuild(ctx context.Context, donor dcs.Member, pidFile string) error {
	rb := a.rebuilder
	if !rb.SwapPending() {
		body, err := fetchWhenSeen(ctx, a.clock, func() (io.ReadCloser, error) {
			return a.fetchClone(ctx, donor.APIURL, a.self.Name)
		})
		if err != nil {
			return fmt.Errorf("fetching backup from donor %s at %s (is its agent running with --mysql-datadir?): %w", donor.Name, donor.APIURL, err)
		}
		_, err = rb.Stage(ctx, body)
		body.Close()
		if err != nil {
			return fmt.Errorf("staging backup from donor %s: %w", donor.Name, err)
		}
		if err := rb.BeginSwap(); err != nil {
			return err
		}
	}
	if err := a.stopLocal(ctx, pidFile); err != nil {
		return err
	}
	if err := rb.Swap(); err != nil {
		return err
	}
	conn, db, err := a.waitLocalUp(ctx, "mysqld to start on the rebuilt data (its supervisor starts it once the marker is gone)")
	if err != nil {
		return err
	}
	defer closeDB(conn)
	pos, err := rb.Position()
	if err != nil {
		return err
	}
	state, err := a.restoredBinlogState(ctx, donor, pos)
	if err != nil {
		// The position alone still replicates correctly; without the
		// state, members may look errant to this one once it leads.
		a.log.Warn("setting the replica position without the donor's binlog state", zap.Error(err))
		state = ""
	}
	if err := db.SetReplicaPosition(ctx, pos, state); err != nil {
		return fmt.Errorf("setting the replica position to the backup's %s: %w", pos, err)
	}
	return nil
}

// restoredBinlogState is the binlog state the rebuilt member starts with
// (gtid.RestoredBinlogState), from the donor's state read now; "" when the
// donor's mysqld does not report one (MySQL).
func (a *Agent) restoredBinlogState(ctx context.Context, donor dcs.Member, pos string) (string, error) {
	p, err := a.peerConn(ctx, donor.MySQLAddr)
	if err != nil {
		return "", fmt.Errorf("reading donor %s's binlog state at %s: %w", donor.Name, donor.MySQLAddr, err)
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	obs, err := p.Observe(cctx)
	if err != nil {
		a.dropPeer(donor.MySQLAddr)
		return "", fmt.Errorf("reading donor %s's binlog state: %w", donor.Name, err)
	}
	if obs.Status.GTIDBinlogState == "" {
		return "", nil
	}
	return gtid.RestoredBinlogState(obs.Status.GTIDBinlogState, pos)
}

// donorLagWait bounds how long a target asks again a donor that has not
// seen the reinit request yet: each agent reads the DCS through its own
// watch, and the donor's may trail the target's.
const donorLagWait = 10 * time.Second

// ErrDonorUnaware is a donor's answer while it does not see the reinit
// request (GET /clone answers 409).
var ErrDonorUnaware = errors.New("the donor does not see the reinit request")

// fetchWhenSeen runs fetch, again every 250 ms for up to donorLagWait while
// the donor does not see the request yet.
func fetchWhenSeen(ctx context.Context, clk clock.Clock, fetch func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	deadline := clk.Now().Add(donorLagWait)
	for {
		body, err := fetch()
		if !errors.Is(err, ErrDonorUnaware) || clk.Now().After(deadline) {
			return body, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-clk.After(250 * time.Millisecond):
		}
	}
}

// stopLocal shuts the local mysqld down and waits until its pid file is
// gone: only then are its data files closed.
func (a *Agent) stopLocal(ctx context.Context, pidFile string) error {
	db, err := a.dial(ctx, a.local)
	if err != nil {
		return nil // down already (a resumed swap): its supervisor waits on the marker
	}
	defer closeDB(db)
	if obs, err := db.Observe(ctx); err == nil && obs.Status.PIDFile != "" {
		pidFile = obs.Status.PIDFile
	}
	if _, err := os.Stat(pidFile); pidFile == "" || err != nil {
		return fmt.Errorf("mysqld's pid file %q is not visible to the agent, so it cannot tell when mysqld has stopped: mount its directory into the agent's container at the same path, or put it on the data volume (--pid-file=<datadir>/mysqld.pid)", pidFile)
	}
	sd, ok := db.(rebuildDB)
	if !ok {
		return errors.New("the local database connection cannot shut mysqld down")
	}
	if err := sd.Shutdown(ctx); err != nil {
		return err
	}
	return a.poll(ctx, "mysqld to stop after SHUTDOWN", func() bool {
		_, err := os.Stat(pidFile)
		return errors.Is(err, os.ErrNotExist)
	})
}

// waitLocalUp waits for mysqld's supervisor to start it (what names the
// wait in a timeout's error), and returns a connection to it, which the
// caller closes.
func (a *Agent) waitLocalUp(ctx context.Context, what string) (Database, rebuildDB, error) {
	var conn Database
	var got rebuildDB
	err := a.poll(ctx, what, func() bool {
		db, err := a.dial(ctx, a.local)
		if err != nil {
			return false
		}
		if _, err := db.Observe(ctx); err != nil {
			closeDB(db)
			return false
		}
		if got, _ = db.(rebuildDB); got == nil {
			closeDB(db)
			return false
		}
		conn = db
		return true
	})
	return conn, got, err
}

func (a *Agent) poll(ctx context.Context, what string, ok func() bool) error {
	deadline := a.clock.Now().Add(rebuildWait)
	for !ok() {
		if a.clock.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", rebuildWait, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.clock.After(200 * time.Millisecond):
		}
	}
	return nil
}

// serveClone streams a backup of this member's mysqld to a member being
// rebuilt. It serves only while a reinit request is pending for another
// member, and only to a verified peer when the API requires client
// certificates: the stream is the whole database.
func (a *Agent) serveClone(w http.ResponseWriter, r *http.Request) {
	if a.self.PeerCertRequired && !apitls.PeerVerified(r.TLS) {
		http.Error(w, "GET /clone needs a client certificate signed by --api-tls-ca", http.StatusForbidden)
		return
	}
	if a.rebuilder == nil {
		http.Error(w, "this agent runs without --mysql-datadir and cannot stream a backup", http.StatusNotImplemented)
		return
	}
	// The store's snapshot, not the loop's last one: the target may ask
	// before our loop has seen the request. Store reads are safe here.
	cctx, cancel := a.callCtx(r.Context())
	cl, err := a.store.Cluster(cctx)
	cancel()
	if err != nil {
		http.Error(w, "reading the DCS: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	target := r.URL.Query().Get("member")
	if cl.Reinit == nil || cl.Reinit.Member != target || target == a.self.Name ||
		(cl.Reinit.Donor != "" && cl.Reinit.Donor != a.self.Name) {
		http.Error(w, fmt.Sprintf("no pending reinit request of member %q from this donor", target), http.StatusConflict)
		return
	}
	w.Header().Set("Trailer", cloneStatusTrailer)
	lw := &lazyWriter{w: w}
	err = a.rebuilder.Stream(r.Context(), lw)
	if !lw.started {
		if err == nil {
			err = errors.New("empty backup stream")
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	status := "ok"
	if err != nil {
		a.log.Error("streaming a backup failed", zap.String("target", target), zap.Error(err))
		status = strings.ReplaceAll(err.Error(), "\n", " ")
	}
	w.Header().Set(cloneStatusTrailer, status)
}

// lazyWriter sends the 200 status with the first byte, so that a backup
// failing at once is answered with its error instead.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.w.Header().Set("Content-Type", "application/octet-stream")
		l.w.WriteHeader(http.StatusOK)
		l.started = true
	}
	return l.w.Write(p)
}

// HTTPFetchClone is the FetchClone over HTTP(S). client must have no
// overall Timeout: a stream lasts as long as the backup.
func HTTPFetchClone(client *http.Client) FetchClone {
	return func(ctx context.Context, apiURL, target string) (io.ReadCloser, error) {
		u := strings.TrimRight(apiURL, "/") + "/clone?member=" + url.QueryEscape(target)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			err := fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(msg)))
			if resp.StatusCode == http.StatusConflict {
				err = fmt.Errorf("%w: %w", ErrDonorUnaware, err)
			}
			return nil, err
		}
		return &trailerCheck{resp: resp}, nil
	}
}

// trailerCheck turns the end of a stream the donor did not finish into an
// error, so that a truncated backup is never prepared.
type trailerCheck struct{ resp *http.Response }

func (t *trailerCheck) Read(p []byte) (int, error) {
	n, err := t.resp.Body.Read(p)
	if err == io.EOF {
		if s := t.resp.Trailer.Get(cloneStatusTrailer); s != "ok" {
			if s == "" {
				s = "stream ended without the donor's status"
			}
			return n, fmt.Errorf("donor's backup failed: %s", s)
		}
	}
	return n, err
}

func (t *trailerCheck) Close() error { return t.resp.Body.Close() }
