// Package dcstest is the contract suite every DCS backend must pass: Run
// drives dcs.Store implementations built by a backend's Factory through the
// lock, expiry, hand-over, identity (member name + agent instance),
// record round-trip, watch and error-mapping rules of the dcs package. Only
// tests import it.
//
// One file per concern: lock.go, identity.go, members.go, config.go,
// requests.go (switchover and reinit), history.go (initialize and history),
// watch.go and errors.go; helpers.go holds what they share, and sim.go the
// HA-loop simulator of the benchmarks.
package dcstest

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Env is one fresh, empty cluster built by a backend for one subtest.
type Env struct {
	// Stores belong to members "m0", "m1", ... in that order, each with its
	// own agent instance id.
	Stores []dcs.Store
	// Twin returns a new store of Stores[i]'s member with another, fresh,
	// instance id: a second agent started with the same name. Advance moves
	// its clock too. Required: the identity cases fail without it.
	Twin func(i int) dcs.Store
	// TTL is the lock ttl the suite declares.
	TTL time.Duration
	// Advance makes d pass for every store's expiry and staleness rules:
	// steps fake clocks, or sleeps where the server's clock rules (etcd).
	Advance func(d time.Duration)
	// AdvanceMember steps only store i's clock. Nil when expiry is not
	// judged on the member's own clock (etcd).
	AdvanceMember func(i int, d time.Duration)
	// MemberTTL and MemberRefresh are the stores' member record timings.
	MemberTTL, MemberRefresh time.Duration
	// Unreachable returns a store (member "unreachable") of this cluster
	// whose DCS does not answer; nil when the backend cannot simulate it.
	Unreachable func() dcs.Store
	// Crash stops store i as a killed agent would: it writes nothing more
	// and cleans nothing up (an etcd session is neither kept alive nor
	// revoked). Nil when Close already does just that.
	Crash func(i int)
	// Remover returns a new store of this cluster (member "remover") with
	// the credentials of an operator running agentctl, which DeleteMember
	// may need beyond an agent's (Kubernetes: the delete verb). Advance
	// moves its clock. Nil when a member's store will do.
	Remover func() dcs.Store
}

// Factory builds an Env with the given number of members. It registers
// cleanup with t.
type Factory func(t *testing.T, members int) *Env

// Run runs the contract suite.
func Run(t *testing.T, newEnv Factory) {
	t.Run("EmptyCluster", func(t *testing.T) { testEmpty(t, newEnv(t, 1)) })
	t.Run("TwoContendersNeverBothHold", func(t *testing.T) { testExclusive(t, newEnv(t, 2)) })
	t.Run("RaceRounds", func(t *testing.T) { testRaceRounds(t, newEnv(t, 5)) })
	t.Run("RacingHoldersNeverOverlap", func(t *testing.T) { testNeverOverlap(t, newEnv(t, 5)) })
	t.Run("RenewKeepsLock", func(t *testing.T) { testRenewKeeps(t, newEnv(t, 2)) })
	t.Run("ExpiresAfterTTL", func(t *testing.T) { testExpires(t, newEnv(t, 2)) })
	t.Run("ExpiryJudgedByObserverClock", func(t *testing.T) { testObserverClock(t, newEnv(t, 3)) })
	t.Run("StaleHolderLosesLock", func(t *testing.T) { testStaleHolder(t, newEnv(t, 3)) })
	t.Run("HandoverToNamedMember", func(t *testing.T) { testHandover(t, newEnv(t, 3)) })
	t.Run("TakeOverAtTheVersionSeen", func(t *testing.T) { testTakeOver(t, newEnv(t, 3)) })
	t.Run("ReleaseFreesLock", func(t *testing.T) { testRelease(t, newEnv(t, 2)) })
	t.Run("InstanceIDs", func(t *testing.T) { testInstanceIDs(t, newEnv(t, 3)) })
	t.Run("SameNameNeverBothHold", func(t *testing.T) { testSameNameRace(t, newEnv(t, 1)) })
	t.Run("SameNameOtherInstanceHolds", func(t *testing.T) { testSameNameHeld(t, newEnv(t, 2)) })
	t.Run("HandoverToNamedInstance", func(t *testing.T) { testHandoverInstance(t, newEnv(t, 3)) })
	t.Run("MemberRecordNamesInstance", func(t *testing.T) { testMemberInstance(t, newEnv(t, 2)) })
	t.Run("MemberRoundTrip", func(t *testing.T) { testMemberRoundTrip(t, newEnv(t, 2)) })
	t.Run("MemberWriteRate", func(t *testing.T) { testMemberWriteRate(t, newEnv(t, 2)) })
	t.Run("MemberGoesStale", func(t *testing.T) { testMemberStale(t, newEnv(t, 2)) })
	t.Run("ConfigRoundTripAndConflict", func(t *testing.T) { testConfig(t, newEnv(t, 2)) })
	t.Run("ConfigChangeRecordedAtomically", func(t *testing.T) { testChangeConfig(t, newEnv(t, 3)) })
	t.Run("DeleteMemberOnlyWhenGone", func(t *testing.T) { testDeleteMember(t, newEnv(t, 3)) })
	t.Run("SwitchoverRoundTrip", func(t *testing.T) { testSwitchover(t, newEnv(t, 2)) })
	t.Run("ReinitRoundTrip", func(t *testing.T) { testReinit(t, newEnv(t, 2)) })
	t.Run("RestartRoundTrip", func(t *testing.T) { testRestart(t, newEnv(t, 2)) })
	t.Run("InitializedOnce", func(t *testing.T) { testInitialized(t, newEnv(t, 2)) })
	t.Run("HistoryBounded", func(t *testing.T) { testHistory(t, newEnv(t, 3)) })
	t.Run("WatchFiresOnChange", func(t *testing.T) { testWatch(t, newEnv(t, 2)) })
	t.Run("InvalidArguments", func(t *testing.T) { testInvalid(t, newEnv(t, 2)) })
	t.Run("ContextErrors", func(t *testing.T) { testContext(t, newEnv(t, 1)) })
	t.Run("Unreachable", func(t *testing.T) { testUnreachable(t, newEnv(t, 1)) })
}
