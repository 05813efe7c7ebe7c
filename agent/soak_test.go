package agent

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// TestLoopRandomFaultsNeverSplitTheBrain injects hundreds of faults in a
// random order — agents killed while their mysqld stays writable, mysqld
// crashes, fences, receiver stops and relay-log waits that time out, DCS
// partitions, restarts — and checks after every single iteration of every
// agent that at most one mysqld is writable (the harness does), then that the
// healed cluster settles on exactly one primary that holds the lock.
func TestLoopRandomFaultsNeverSplitTheBrain(t *testing.T) {
	const injections = 300
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("SOAK_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (SOAK_SEED=%[1]d replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	names := []string{"db1", "db2", "db3"}
	h := newLoopHarness(t, names...)
	h.bootstrap()

	dead := map[string]bool{}        // agent not running
	partitioned := map[string]bool{} // cut off from the DCS
	counts := map[string]int{}
	heal := func(n string) {
		d := h.mysql.byName(n)
		if !d.up {
			// A crashed mysqld restarts read-only, as its my.cnf says.
			d.up, d.readOnly = true, true
		}
		d.unreachable = false
		d.fenceErr, d.stopIOErr, d.waitErr = nil, nil, nil
		if partitioned[n] {
			h.srv.Heal(n)
			delete(partitioned, n)
		}
		if dead[n] {
			h.unreachable[n] = false
			h.startAgent(n)
			delete(dead, n)
		}
	}
	for i := range injections {
		n := names[rng.IntN(len(names))]
		d := h.mysql.byName(n)
		var what string
		switch rng.IntN(9) {
		case 0:
			if dead[n] {
				continue
			}
			what = "kill agent (mysqld stays as it is)"
			dead[n], h.unreachable[n] = true, true
		case 1:
			what = "crash mysqld"
			d.up = false
		case 2:
			what = "fence times out"
			d.fenceErr = errTimedOut
		case 3:
			what = "receiver stop times out"
			d.stopIOErr = errTimedOut
		case 4:
			what = "relay-log wait times out"
			d.waitErr = errTimedOut
		case 5:
			what = "cut off from the DCS"
			h.srv.Partition(n)
			partitioned[n] = true
		case 6:
			what = "write on whoever is writable"
			for _, w := range h.mysql.writable() {
				h.mysql.write(w)
			}
		default:
			what = "heal"
			heal(n)
		}
		counts[what]++
		var live []string
		for _, m := range names {
			if !dead[m] {
				live = append(live, m)
			}
		}
		t.Logf("injection %d: %s: %s (dead %v, partitioned %v)", i+1, n, what, keys(dead), keys(partitioned))
		h.advance(time.Duration(1+rng.IntN(4))*time.Second, live...)
	}
	for _, n := range names {
		heal(n)
	}
	h.advance(time.Minute, names...)
	w := h.mysql.writable()
	if len(w) != 1 || h.holder() != w[0] {
		t.Fatalf("after healing: writable %v, holder %q; want exactly the holder writable", w, h.holder())
	}
	for _, n := range names {
		if n != w[0] && h.labels.role(n) == dcs.RolePrimary {
			t.Errorf("%s still labelled primary", n)
		}
	}
	t.Logf("%d injections, no two writable after any iteration: %v", injections, counts)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
