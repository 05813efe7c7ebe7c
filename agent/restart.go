package agent

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
)

// A restart (agentctl restart) shuts this member's mysqld down cleanly and
// waits for its supervisor (the kubelet restarting the container, systemd,
// mysqld_safe) to start it again: to apply a setting that needs a restart,
// say. Only a replica restarts: agentctl switches over first, and the
// holder's agent refuses, so the lock never waits on a mysqld that is
// coming back. Like a rebuild, it runs in a goroutine the loop polls, and
// the loop leaves mysqld alone meanwhile; the member is tagged restarting,
// so nobody hands over to it.
//
// Safe after a crash at any line: the request stays until the agent has
// recorded the outcome and cleared it, and a mysqld that started after the
// request was made has been restarted already (failover.RestartedSince),
// so a new agent only waits for it to answer.

// restartRun is a restart in progress.
type restartRun struct {
	version string // of the request being served
	since   time.Time
	done    chan struct{}
	err     error // set before done closes
}

// errRestartRefused is an outcome failover.RestartRefusal gave.
type errRestartRefused string

func (e errRestartRefused) Error() string { return string(e) }

// uptimeDB is what a restart reads of the local mysqld beyond Database.
type uptimeDB interface {
	Uptime(ctx context.Context) (time.Duration, error)
}

// handleRestart serves a restart request naming this member; it reports
// whether the loop must leave mysqld alone in this iteration. A run is
// not stopped when its request is withdrawn: a SHUTDOWN cannot be taken
// back, and mysqld is left alone until it answers again.
func (a *Agent) handleRestart(ctx context.Context, cl *dcs.Cluster) bool {
	if run := a.restarting; run != nil {
		select {
		case <-run.done:
		default:
			return true
		}
		a.restarting = nil
		req := cl.Restart
		if req == nil || req.Version != run.version {
			req = nil // withdrawn meanwhile: record the outcome all the same
		}
		a.finishRestart(ctx, req, run.err)
		return false
	}
	req := cl.Restart
	if req == nil || req.Err != nil || req.Member != a.self.Name {
		return false
	}
	if why := failover.RestartRefusal(a.hasDeadline() || cl.Leader != nil && cl.Leader.Holder == a.self.Name); why != "" {
		a.finishRestart(ctx, req, errRestartRefused(why))
		return false
	}
	run := &restartRun{version: req.Version, since: a.clock.Now(), done: make(chan struct{})}
	a.restarting = run
	pidFile := a.pidFile
	a.log.Info("restarting the local mysqld (agentctl restart)")
	a.labeler.Event(ctx, a.self.Name, eventNormal, "RestartStarted", "restarting mysqld (agentctl restart)")
	go func() {
		defer close(run.done)
		run.err = a.runRestart(ctx, req.RequestedAt, pidFile)
	}()
	return true
}

// runRestart shuts mysqld down and waits for it to answer again, unless it
// was restarted since requestedAt (failover.RestartedSince): by a previous
// agent that crashed before it cleared the request.
func (a *Agent) runRestart(ctx context.Context, requestedAt time.Time, pidFile string) error {
	if db, err := a.dial(ctx, a.local); err == nil {
		up, ok := db.(uptimeDB)
		var uptime time.Duration
		if ok {
			uptime, err = up.Uptime(ctx)
		}
		closeDB(db)
		if ok && err == nil && failover.RestartedSince(a.clock.Now().Add(-uptime), requestedAt) {
			a.log.Info("mysqld started after the restart request: restarted already", zap.Duration("uptime", uptime))
			return nil
		}
	}
	if err := a.stopLocal(ctx, pidFile); err != nil {
		return err
	}
	db, _, err := a.waitLocalUp(ctx, "mysqld to start again after SHUTDOWN (its supervisor starts it)")
	if err != nil {
		return err
	}
	closeDB(db)
	return nil
}

// finishRestart records the outcome, and clears req when it is still
// pending.
func (a *Agent) finishRestart(ctx context.Context, req *dcs.Restart, runErr error) {
	reason, level, event := "done", eventNormal, "RestartDone"
	if runErr != nil {
		reason, level, event = runErr.Error(), eventWarning, "RestartFailed"
		var refused errRestartRefused
		if !errors.As(runErr, &refused) {
			reason = "failed: " + reason
		}
		a.log.Error("restart of the local mysqld did not happen", zap.String("reason", reason))
	} else {
		a.log.Info("restarted the local mysqld; following the leader")
	}
	a.labeler.Event(ctx, a.self.Name, level, event, reason)
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if err := a.store.AppendHistory(cctx, dcs.HistoryEntry{Kind: dcs.HistoryRestart, To: a.self.Name, At: a.clock.Now(), Reason: reason}); err != nil {
		a.log.Warn("recording the restart in the history failed", zap.Error(err))
	}
	if req == nil {
		return
	}
	if err := a.store.ClearRestart(cctx, req.Version); err != nil && !errors.Is(err, dcs.ErrNotFound) {
		a.log.Warn("clearing the restart request failed", zap.Error(err))
	}
}
