package failover

import (
	"fmt"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Self-healing: a member that cannot follow the leader on its own data is
// rebuilt from a donor without a person, under two rules. What exists
// nowhere else is saved first: a diverged member's extra transactions go
// to a file on its volume, and without a complete save there is no
// rebuild. And the cluster's setting decides: rebuild_diverged=report, a
// paused cluster, or reseed_after=0 leave it to a person.

// HealKind is what a member's agent does about its data this iteration.
type HealKind uint8

const (
	// HealNone: nothing to heal.
	HealNone HealKind = iota
	// HealWait: something to heal, but not now; Reason says why.
	HealWait
	// HealSave: save the transactions the leader lacks (Errant) first.
	HealSave
	// HealRebuild: request the rebuild of this member from Donor.
	HealRebuild
)

// HealState is what the agent knows of its member's data and the cluster.
type HealState struct {
	Config dcs.Config
	Flavor gtid.Flavor
	// CanRebuild: the agent runs with --mysql-datadir.
	CanRebuild bool
	// Leader is the lock holder we would follow.
	Leader string
	// Errant: our transactions the leader lacks; "" when none.
	Errant string
	// Saved is the file that holds Errant's transactions, once saved;
	// SaveFailed why the last save failed (the agent tries again later).
	Saved, SaveFailed string
	// SourcePurgedSince: since when our receiver has failed with error
	// 1236 (the source purged binary logs we need); zero when it has not.
	SourcePurgedSince time.Time
	Now               time.Time
	// Pending: a reinit request is pending, for any member.
	Pending bool
	// Donor is ReinitDonor's choice; DonorErr why there is none.
	Donor    string
	DonorErr error
	// LastRebuildFailed: when our last automatic rebuild failed, and why.
	LastRebuildFailed    time.Time
	LastRebuildFailedWhy string
}

// RebuildRetry spaces automatic rebuilds of one member after one failed:
// each loads a donor, and the cause (no space, a broken donor) is rarely
// gone at once.
const RebuildRetry = 5 * time.Minute

// HealAction is Heal's verdict.
type HealAction struct {
	Kind   HealKind
	Donor  string
	Reason string
}

// Heal decides whether this member saves its extra transactions, asks to
// be rebuilt, or waits, and why. It is pure; the agent acts on it.
func Heal(s HealState) HealAction {
	var why string
	switch {
	case s.Errant != "":
		why = fmt.Sprintf("it holds transactions leader %s lacks (%s)", s.Leader, s.Errant)
	case !s.SourcePurgedSince.IsZero():
		why = "its source purged binary logs it needs (error 1236)"
	default:
		return HealAction{Kind: HealNone}
	}
	wait := func(format string, args ...any) HealAction {
		return HealAction{Kind: HealWait, Reason: why + "; " + fmt.Sprintf(format, args...)}
	}
	if s.Config.Paused {
		return wait("not rebuilding while the cluster is paused")
	}
	if refusal := ReinitRefusal(ReinitTarget{CanRebuild: s.CanRebuild, Flavor: s.Flavor}); refusal != "" {
		return wait("it cannot be rebuilt automatically: %s", refusal)
	}
	if s.Errant != "" {
		switch {
		case s.Config.RebuildDiverged == dcs.RebuildReport:
			return wait("rebuild_diverged=report: save them if they matter, then run `agentctl reinit`")
		case s.Saved == "" && s.SaveFailed != "":
			return wait("not rebuilding: saving them failed, and they exist nowhere else: %s", s.SaveFailed)
		case s.Saved == "":
			return HealAction{Kind: HealSave, Reason: why + "; saving them before a rebuild"}
		}
		why += "; saved to " + s.Saved
	} else {
		left := s.Config.ReseedAfter - s.Now.Sub(s.SourcePurgedSince)
		switch {
		case s.Config.ReseedAfter == 0:
			return wait("reseed_after=0: run `agentctl reinit`")
		case left > 0:
			return wait("rebuilding in %s (reseed_after=%s) unless it recovers", left.Round(time.Second), s.Config.ReseedAfter)
		}
		why += fmt.Sprintf(" for %s", s.Now.Sub(s.SourcePurgedSince).Round(time.Second))
	}
	retry := RebuildRetry - s.Now.Sub(s.LastRebuildFailed)
	switch {
	case !s.LastRebuildFailed.IsZero() && retry > 0:
		return wait("the last automatic rebuild failed (%s); trying again in %s", s.LastRebuildFailedWhy, retry.Round(time.Second))
	case s.Pending:
		return wait("another rebuild is pending; one runs at a time")
	case s.DonorErr != nil:
		return wait("no donor: %v", s.DonorErr)
	}
	return HealAction{Kind: HealRebuild, Donor: s.Donor, Reason: "automatic rebuild from " + s.Donor + ": " + why}
}
