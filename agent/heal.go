package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/failover"
	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/salvage"
)

// Self-healing (failover.Heal decides): a follower that cannot follow the
// leader on its own data saves what only it holds, then asks to be
// rebuilt from a donor through the same request agentctl reinit writes,
// so the rebuild, its reporting and its history are reinit's.

// SaveTransactions saves a diverged member's extra transactions (package
// salvage's Save, with the data directory filled in by cmd/agent); nil
// when this agent cannot save, and then never rebuilds a diverged member.
type SaveTransactions func(ctx context.Context, o salvage.SaveOptions) (salvage.Saved, error)

// saveRetry spaces the attempts to save: a failed save (a purged or
// unreadable binary log) rarely heals by itself, and each reads every log.
const saveRetry = time.Minute

// saveTimeout bounds one save; the loop waits for it.
const saveTimeout = 2 * time.Minute

// erSourcePurged is the receiver's error when its source no longer has
// the binary logs it needs (ER_SOURCE_FATAL_ERROR_READING_BINLOG).
const erSourcePurged = 1236

// healMemory is what the loop remembers between iterations for healing.
type healMemory struct {
	// leaderState is the leader's gtid_binlog_state when our errant set
	// was judged: what it lacks is what we save.
	leaderState string
	// saved is the file holding savedFor's transactions.
	saved, savedFor string
	// saveFailed: why the last save failed, at saveFailedAt.
	saveFailed   string
	saveFailedAt time.Time
	// sourcePurgedSince: our receiver has failed with erSourcePurged since.
	sourcePurgedSince time.Time
	// rebuildFailedAt: when our last automatic rebuild failed, and why.
	rebuildFailedAt  time.Time
	rebuildFailedWhy string
	// reason is the last verdict's, logged when it changes and served in
	// /status as "healing".
	reason string
}

// noteReceiver follows how long our source has refused us the binary logs
// we need.
func (a *Agent) noteReceiver(r *mysqlctl.ReplicaStatus) {
	h := &a.healing
	switch {
	case r == nil || r.LastIOErrno != erSourcePurged:
		h.sourcePurgedSince = time.Time{}
	case h.sourcePurgedSince.IsZero():
		h.sourcePurgedSince = a.clock.Now()
	}
}

// heal runs failover.Heal on what we know and acts on its verdict.
func (a *Agent) heal(ctx context.Context, cl *dcs.Cluster, leader string) {
	h := &a.healing
	if h.savedFor != a.errant {
		h.saved, h.savedFor = "", "" // a new errant set needs a save of its own
	}
	if h.saveFailed != "" && a.clock.Since(h.saveFailedAt) >= saveRetry {
		h.saveFailed = ""
	}
	donor, donorErr := failover.ReinitDonor(cl, a.self.Name, "")
	act := failover.Heal(failover.HealState{
		Config: a.clusterConfig, Flavor: a.flavor(), CanRebuild: a.rebuilder != nil, Leader: leader,
		Errant: a.errant, Saved: h.saved, SaveFailed: h.saveFailed, SourcePurgedSince: h.sourcePurgedSince,
		Now: a.clock.Now(), Pending: cl.Reinit != nil, Donor: donor.Name, DonorErr: donorErr,
		LastRebuildFailed: h.rebuildFailedAt, LastRebuildFailedWhy: h.rebuildFailedWhy,
	})
	switch act.Kind {
	case failover.HealNone:
		h.reason = ""
	case failover.HealWait:
		if act.Reason != h.reason {
			a.log.Warn("not healing this member yet", zap.String("reason", act.Reason))
		}
		h.reason = act.Reason
	case failover.HealSave:
		h.reason = act.Reason
		a.saveErrant(ctx, leader)
	case failover.HealRebuild:
		h.reason = act.Reason
		a.requestRebuild(ctx, act)
	}
}

// saveErrant saves our transactions the leader lacks.
func (a *Agent) saveErrant(ctx context.Context, leader string) {
	h := &a.healing
	saved, err := a.saveTransactionsNow(ctx, leader)
	if err != nil {
		h.saveFailed, h.saveFailedAt = err.Error(), a.clock.Now()
		a.log.Error("saving the transactions the leader lacks failed; not rebuilding", zap.String("errant", a.errant), zap.Error(err))
		a.labeler.Event(ctx, a.self.Name, eventWarning, "SaveFailed", "saving errant transactions "+a.errant+" failed: "+err.Error())
		return
	}
	h.saved, h.savedFor = saved.Path, a.errant
	a.metrics.SavedTransactions.Add(float64(saved.Count))
	a.log.Info("saved the transactions the leader lacks", zap.String("errant", a.errant), zap.String("file", saved.Path),
		zap.Int("transactions", saved.Count), zap.String("gtids", saved.GTIDs))
	a.labeler.Event(ctx, a.self.Name, eventNormal, "TransactionsSaved",
		fmt.Sprintf("%d transactions the leader lacks (%s) saved to %s", saved.Count, saved.GTIDs, saved.Path))
}

func (a *Agent) saveTransactionsNow(ctx context.Context, leader string) (salvage.Saved, error) {
	if a.saveTxns == nil {
		return salvage.Saved{}, errors.New("this agent cannot save transactions (it runs without --mysql-datadir)")
	}
	lister, ok := a.db.(interface {
		BinaryLogFiles(ctx context.Context) ([]string, error)
	})
	if !ok {
		return salvage.Saved{}, errors.New("the local database connection cannot list binary logs")
	}
	want, err := salvage.NotIn(a.healing.leaderState)
	if err != nil {
		return salvage.Saved{}, fmt.Errorf("the leader's gtid_binlog_state: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	files, err := lister.BinaryLogFiles(sctx)
	if err != nil {
		return salvage.Saved{}, err
	}
	saved, err := a.saveTxns(sctx, salvage.SaveOptions{Cluster: a.self.Cluster, Member: a.self.Name, Leader: leader,
		Files: files, Want: want, Now: a.clock.Now()})
	if err == nil && saved.Count == 0 {
		// The binary logs no longer hold them (purged): nothing was
		// saved, so nothing may be destroyed.
		err = fmt.Errorf("none of the transactions %s is in the binary logs %v (purged?)", a.errant, files)
	}
	return saved, err
}

// requestRebuild asks for our own rebuild, as agentctl reinit would.
func (a *Agent) requestRebuild(ctx context.Context, act failover.HealAction) {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	err := a.store.RequestReinit(cctx, dcs.Reinit{Member: a.self.Name, Donor: act.Donor, Reason: act.Reason})
	if err != nil {
		if !errors.Is(err, dcs.ErrExists) {
			a.log.Warn("requesting our automatic rebuild failed", zap.Error(err))
		}
		return
	}
	a.metrics.AutoRebuilds.Inc()
	a.log.Warn("requested an automatic rebuild of this member", zap.String("donor", act.Donor), zap.String("reason", act.Reason))
	a.labeler.Event(ctx, a.self.Name, eventWarning, "AutoRebuild", act.Reason)
}
