package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// Failsafe mode (docs/reference.md, "Failsafe mode") on the real node: the
// deployment turns it on (--failsafe), and these scenarios say so with
// agentctl set-config, so that none depends on another having left it as
// it was. While the API server (the DCS) is out of reach, the primary
// stays writable only as long as every member confirms it over HTTP; cut
// off from everything, it fences itself and a replica takes over. The
// scenarios of the rule failsafe relaxes switch it off for their duration
// (withoutFailsafe).

// withFailsafe runs fn with failsafe_mode on in the cluster config, the
// deployment's default.
func withFailsafe(t *testing.T, fn func()) {
	c := deployed(t)
	setConfig(t, c, "failsafe_mode=true")
	fn()
}

// withoutFailsafe runs fn with failsafe_mode off, then restores the
// deployment's default.
func withoutFailsafe(t *testing.T, fn func()) {
	c := deployed(t)
	setConfig(t, c, "failsafe_mode=false")
	defer setConfig(t, c, "failsafe_mode=true")
	fn()
}

// setConfig runs agentctl set-config and gives the agents three loops to
// read it (they read the config with every iteration, loop_wait 1 s).
func setConfig(t *testing.T, c *cluster, assignment string) {
	t.Helper()
	cmd, err := agentctl(c, "set-config", assignment)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agentctl set-config %s: %v\n%s", assignment, err, out)
	}
	time.Sleep(3 * time.Second)
}

// keepsThePrimary is sc with failsafe mode's promise: the lock does not
// move and the writes go on.
func keepsThePrimary(sc scenario) scenario {
	sc.leader = sameLeader
	sc.expect = checker.Expect{MaxOutage: 3 * time.Second}
	sc.target = time.Second
	return sc
}

// The API server is down for 30 s: every member confirms the primary, so it
// keeps taking writes through the whole outage (without failsafe mode it
// demotes itself, TestAPIServerDown).
func TestFailsafeAPIServerDown(t *testing.T) {
	withFailsafe(t, func() {
		keepsThePrimary(apiServerDown("failsafe: the API server down for 30 s")).run(t)
	})
}

// The primary alone is cut off from the API server, for 20 s: its peers
// still reach it, confirm it and do not race, so it is not demoted and no
// second primary appears (without failsafe mode the lock moves,
// TestPrimaryCutFromAPIServer).
func TestFailsafePrimaryCutFromAPIServer(t *testing.T) {
	withFailsafe(t, func() {
		keepsThePrimary(primaryCutFromAPIServer("failsafe: the primary cut off from the API server only")).run(t)
	})
}

// The primary is cut off from everything for 20 s: no member can confirm
// it, so it fences itself before its deadline and a replica takes over; no
// instant has two writable members.
func TestFailsafePrimaryIsolated(t *testing.T) {
	withFailsafe(t, func() {
		primaryIsolated("failsafe: the primary isolated from everything, then healed").run(t)
	})
}

// The whole control plane (API server, controller manager, scheduler) down
// for 5 minutes, as a managed cluster's upgrade takes it, with the
// deployment's defaults: every member confirms the primary, which keeps
// taking writes through the Service all along (kube-proxy keeps its
// rules); nothing is lost, and never two writable. A 5-minute fault: run
// once by make e2e and make bench-failover (-onnode.long), not make test.
func TestFailsafeControlPlaneDownFiveMinutes(t *testing.T) {
	if !*flagLong {
		t.Skip("a 5-minute outage: make e2e and make bench-failover run it (-onnode.long)")
	}
	withFailsafe(t, func() {
		sc := keepsThePrimary(apiServerDown("failsafe: the control plane down for 5 min"))
		sc.hold, sc.trials = 5*time.Minute, 1
		inject := sc.inject
		sc.inject = func(tr *trial) error {
			tr.c.node.StopControllers() // RestartControllers, at the heal, starts them again
			return inject(tr)
		}
		sc.run(t)
	})
}
