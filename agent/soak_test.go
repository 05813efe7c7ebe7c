package agent

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
)

// TestLoopRandomFaultsNeverSplitTheBrain injects hundreds of faults in a
// random order — agents killed while their mysqld stays writable and goes
// on streaming and acknowledging, agents that stay dead, mysqld crashes
// (with the agent dead too: a pod whose every container stopped),
// fences, receiver stops and relay-log waits that time out, stopped
// receivers, broken SQL threads, DCS partitions, nofailover restarts,
// leftover records of removed members, ttl changes at run time — and
// checks after every single iteration of every agent that at most one
// mysqld is writable and, in lossless mode (semi_sync strict), that a
// writable one holds every write a client was told committed; then that
// the healed cluster settles on exactly one primary that holds the lock.
//
// Writes reach a random subset of the replicas at once, as they do when
// the primary dies mid-stream. SOAK_SEED replays a run; SOAK_RUNS runs
// that many seeds from it in each mode.
func TestLoopRandomFaultsNeverSplitTheBrain(t *testing.T) {
	// make test runs 15 fixed seeds, each mode: a random seed would fail
	// 4 (async) and 14 (strict) runs in 1,000 on open liveness bugs (the
	// healed cluster left without a writable primary: issue 20's note
	// lists the seeds), never on safety. SOAK_SEED and SOAK_RUNS explore.
	seed, replay := uint64(1000), false
	if s, err := strconv.ParseUint(os.Getenv("SOAK_SEED"), 10, 64); err == nil {
		seed, replay = s, true
	}
	runs := 15
	if os.Getenv("SOAK_SEED") != "" {
		runs = 1
	}
	if n, err := strconv.Atoi(os.Getenv("SOAK_RUNS")); err == nil && n > 0 {
		runs = n
	}
	for _, mode := range []dcs.SemiSyncMode{dcs.SemiSyncOff, dcs.SemiSyncStrict} {
		t.Run(mode.String(), func(t *testing.T) {
			total := soakResult{counts: map[string]int{}}
			for r := range runs {
				res := soakRun(t, seed+uint64(r), mode, replay && runs == 1)
				total.injections += res.injections
				total.confirmed += res.confirmed
				total.primaries += res.primaries
				total.deadmen += res.deadmen
				for k, v := range res.counts {
					total.counts[k] += v
				}
				if res.violation != "" {
					total.violations++
					t.Errorf("SOAK_SEED=%d: %s", seed+uint64(r), res.violation)
				}
				if res.leftoverBlocked {
					total.leftoverRuns++
				}
				if res.unsettled != "" {
					total.unsettledRuns++
					t.Errorf("SOAK_SEED=%d: %s", seed+uint64(r), res.unsettled)
				}
			}
			t.Logf("semi_sync %s: %d runs from seed %d, %d injections, %d primaries, %d confirmed writes, %d dead-man fences, %d violations, %d unsettled, "+
				"%d settled only after agentctl remove of the leftover records; injections by kind: %v",
				mode, runs, seed, total.injections, total.primaries, total.confirmed, total.deadmen, total.violations, total.unsettledRuns,
				total.leftoverRuns, total.counts)
		})
	}
}

type soakResult struct {
	injections, violations, unsettledRuns int
	counts                                map[string]int
	// violation is the first safety violation of a run; unsettled: the
	// healed cluster did not settle on one primary; leftoverBlocked: not
	// before the leftover records were removed (agentctl remove).
	violation, unsettled string
	leftoverBlocked      bool
	leftoverRuns         int
	// confirmed counts the writes clients were told committed; primaries
	// the times a server became the only writable one.
	confirmed, primaries int
	// deadmen counts the dead-man events that fenced a writable server.
	deadmen int
}

func soakRun(t *testing.T, seed uint64, mode dcs.SemiSyncMode, verbose bool) soakResult {
	const injections = 300
	rng := rand.New(rand.NewPCG(seed, 0))
	cfg := dcs.DefaultConfig()
	cfg.SemiSync = mode
	names := []string{"db1", "db2", "db3"}
	var h *loopHarness
	res := soakResult{counts: map[string]int{}}
	logf := func(format string, args ...any) {
		if verbose {
			t.Logf(format, args...)
		}
	}
	var log *zap.Logger // the test's, when replaying
	if !verbose {
		log = zap.NewNop() // hundreds of runs would log millions of lines
	}
	h = newLoopHarnessLogged(t, cfg, log, names...)
	h.mysql.stream = func(string) bool { return rng.IntN(2) == 0 }
	h.mysql.clock = h.clock
	lastPrimary := ""
	h.check = func(after string) {
		if res.violation != "" {
			return
		}
		w := h.mysql.writable()
		if len(w) == 1 && w[0] != lastPrimary {
			lastPrimary = w[0]
			res.primaries++
		}
		if len(w) > 1 {
			res.violation = fmt.Sprintf("split brain after %s's iteration: %v are writable", after, w)
			return
		}
		if mode != dcs.SemiSyncStrict || len(w) == 0 {
			return
		}
		d := h.mysql.byName(w[0])
		h.mysql.mu.Lock()
		confirmed := slices.Clone(h.mysql.confirmed)
		h.mysql.mu.Unlock()
		for _, x := range confirmed {
			if !d.has(x) {
				res.violation = fmt.Sprintf("after %s's iteration: %s is writable without the acknowledged write %s (its history ends at %s)\n%s",
					after, w[0], x, d.pos(), h.describeServers())
				return
			}
		}
	}
	h.bootstrap()
	op, err := h.srv.NewStore(memory.Options{Member: "agentctl", Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()

	dead := map[string]bool{}           // agent not running
	stuckUntil := map[string]int{}      // agent cannot restart before this injection
	partitioned := map[string]bool{}    // cut off from the DCS
	leftovers, left := 0, []string(nil) // records left, those not removed yet
	podUp := func(n string) {
		h.labels.mu.Lock()
		delete(h.labels.down, n)
		h.labels.mu.Unlock()
	}
	restart := func(n string) {
		h.unreachable[n] = false
		h.startAgent(n)
		delete(dead, n)
		podUp(n)
	}
	heal := func(n string, i int) {
		d := h.mysql.byName(n)
		h.mysql.mu.Lock()
		if !d.up {
			// A crashed mysqld restarts read-only, as its my.cnf says.
			d.up, d.readOnly = true, true
			defer podUp(n)
		}
		d.unreachable, d.sqlBroken = false, false
		d.fenceErr, d.stopIOErr, d.waitErr = nil, nil, nil
		h.mysql.mu.Unlock()
		if partitioned[n] {
			h.srv.Heal(n)
			delete(partitioned, n)
		}
		if dead[n] && i >= stuckUntil[n] {
			restart(n)
		}
	}
	for i := range injections {
		n := names[rng.IntN(len(names))]
		d := h.mysql.byName(n)
		var what string
		switch rng.IntN(14) {
		case 0:
			if dead[n] {
				continue
			}
			what = "kill agent (mysqld stays, streaming)"
			dead[n], h.unreachable[n] = true, true
		case 1:
			if dead[n] {
				continue
			}
			what = "kill agent, which cannot restart for long"
			dead[n], h.unreachable[n] = true, true
			stuckUntil[n] = i + 10 + rng.IntN(30)
		case 2:
			what = "crash mysqld"
			d.crash()
			if dead[n] {
				// Its agent is dead too: the kubelet reports every
				// container of the pod stopped, until either restarts.
				what = "crash mysqld, agent dead: the pod's containers all stopped"
				h.labels.mu.Lock()
				h.labels.down[n] = "uid-" + n
				h.labels.mu.Unlock()
			}
		case 3:
			what = "fence times out"
			d.setFault(&d.fenceErr, errTimedOut)
		case 4:
			what = "receiver stop times out"
			d.setFault(&d.stopIOErr, errTimedOut)
		case 5:
			what = "relay-log wait times out"
			d.setFault(&d.waitErr, errTimedOut)
		case 6:
			what = "cut off from the DCS"
			h.srv.Partition(n)
			partitioned[n] = true
		case 7, 8:
			what = "writes on whoever is writable"
			for _, w := range h.mysql.writable() {
				for range 1 + rng.IntN(3) {
					h.mysql.write(w)
				}
			}
		case 9:
			if dead[n] {
				continue
			}
			h.noFailover[n] = !h.noFailover[n]
			what = "agent restarted with nofailover flipped"
			h.startAgent(n)
		case 10:
			what = "SQL thread broken (relay log not applied)"
			h.mysql.mu.Lock()
			d.sqlBroken = true
			h.mysql.mu.Unlock()
		case 11:
			what = "receiver stopped"
			h.mysql.mu.Lock()
			d.ioRunning = false
			h.mysql.mu.Unlock()
		case 12:
			if len(left) == 0 {
				leftovers++
				what = "leftover record of a removed member"
				left = append(left, fmt.Sprintf("gone%d", leftovers))
				h.leaveRecord(left[len(left)-1], d.pos())
			} else if err := op.DeleteMember(h.ctx, left[0]); err == nil {
				// Once stale, as the operator does (agentctl remove): in
				// lossless mode it may block every promotion until then.
				what = "agentctl remove of a leftover record"
				left = left[1:]
			} else {
				continue
			}
		default:
			ttl := []time.Duration{5, 6, 8, 10, 15}[rng.IntN(5)] * time.Second
			what = "ttl changed at run time"
			h.setTTL(op, ttl)
		}
		res.counts[what]++
		res.injections++
		var live []string
		for _, m := range names {
			if !dead[m] {
				live = append(live, m)
			}
		}
		logf("injection %d: %s: %s (dead %v, partitioned %v)", i+1, n, what, keys(dead), keys(partitioned))
		if rng.IntN(4) == 0 {
			heal(names[rng.IntN(len(names))], i)
		}
		h.advance(time.Duration(1+rng.IntN(4))*time.Second, live...)
		if res.violation != "" {
			return res
		}
	}
	clear(stuckUntil)
	for _, n := range names {
		heal(n, injections)
		if h.noFailover[n] {
			h.noFailover[n] = false
			restart(n)
		}
	}
	h.advance(time.Minute, names...)
	if w := h.mysql.writable(); len(left) > 0 && res.violation == "" && (len(w) != 1 || h.holder() != w[0]) {
		// In lossless mode a leftover record blocks a holder that cannot
		// tell it from a lost acknowledger: the operator removes it.
		res.leftoverBlocked = true
		for _, n := range left {
			if err := op.DeleteMember(h.ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		h.advance(time.Minute, names...)
	}
	h.mysql.mu.Lock()
	res.confirmed, res.deadmen = len(h.mysql.confirmed), h.mysql.deadmenFired
	h.mysql.mu.Unlock()
	if res.violation != "" {
		return res
	}
	w := h.mysql.writable()
	if len(w) != 1 || h.holder() != w[0] {
		res.unsettled = fmt.Sprintf("after healing: writable %v, holder %q; want exactly the holder writable", w, h.holder())
		return res
	}
	for _, n := range names {
		if n != w[0] && h.labels.role(n) == dcs.RolePrimary {
			res.unsettled = n + " still labelled primary"
		}
	}
	return res
}

// leaveRecord writes the record of a member that was scaled away: a
// replica at pos whose server and agent are gone for good.
func (h *loopHarness) leaveRecord(name, pos string) {
	h.t.Helper()
	s, err := h.srv.NewStore(memory.Options{Member: name, Clock: h.clock})
	if err != nil {
		h.t.Fatal(err)
	}
	defer s.Close()
	h.labels.mu.Lock()
	h.labels.gone[name] = true // its pod went with the scale-down
	h.labels.mu.Unlock()
	err = s.UpdateMember(h.ctx, dcs.Member{Name: name, Role: dcs.RoleReplica, APIURL: "http://" + name + ":8008",
		MySQLAddr: "10.0.9.9:3306", GTIDExecuted: pos, GTIDRetrieved: pos, Receiver: dcs.ReceiverRunning})
	if err != nil {
		h.t.Fatal(err)
	}
}

// setTTL changes the cluster's ttl, as agentctl set-config does.
func (h *loopHarness) setTTL(op *memory.Store, ttl time.Duration) {
	h.t.Helper()
	cl, err := op.Cluster(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := cl.Config
	cfg.TTL = ttl
	if err := op.SetConfig(h.ctx, cfg, cl.ConfigVersion); err != nil {
		h.t.Fatal(err)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// describeServers is every fake server's state and member record, for a
// violation's report.
func (h *loopHarness) describeServers() string {
	var b strings.Builder
	var cl *dcs.Cluster
	if st, err := h.srv.NewStore(memory.Options{Member: "dump", Clock: h.clock}); err == nil {
		cl, _ = st.Cluster(h.ctx)
		st.Close()
	}
	if cl != nil && cl.Leader != nil {
		fmt.Fprintf(&b, "  lock: %s expired %v\n", cl.Leader.Holder, cl.Leader.Expired)
	}
	for _, n := range h.names {
		d := h.mysql.byName(n)
		h.mysql.mu.Lock()
		fmt.Fprintf(&b, "  %s: up %v ro %v hist %v relay %v source %q io %v errno %d semiReplica %v unreachable %v\n",
			n, d.up, d.readOnly, d.hist, d.relay, d.source, d.ioRunning, d.ioErrno, d.semiReplica, d.unreachable)
		h.mysql.mu.Unlock()
		if m, ok := cl.Member(n); cl != nil && ok {
			fmt.Fprintf(&b, "     record: role %s stale %v executed %q retrieved %q tags %v\n", m.Role, m.Stale, m.GTIDExecuted, m.GTIDRetrieved, m.Tags)
		}
	}
	return b.String()
}
