package agent

import (
	"testing"
	"time"
)

// TestLoopColdStartTheMostCompleteMemberLeads: every member stops at once
// (pods deleted, a node restarted), and the least complete one comes back
// first. It must not lead with what it has: the others' records, still
// fresh, say they hold transactions it lacks, so it waits for them; the
// most complete one leads and nothing is lost. Also while the better
// member's agent answers before its mysqld is up (its answer carries no
// GTIDs, and its record's still count).
func TestLoopColdStartTheMostCompleteMemberLeads(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	// db3 misses the last writes: its mysqld is down while db1 takes them
	// and db2 receives them.
	db3 := h.mysql.byName("db3")
	db3.crash()
	for range 3 {
		if !h.mysql.write("db1") {
			t.Fatal("the primary refused a write")
		}
	}
	h.advance(12*time.Second, "db1", "db2") // the records carry the positions
	last := h.mysql.byName("db1").last()
	if !h.mysql.byName("db2").has(last) || db3.has(last) {
		t.Fatalf("set-up: db2 has %s: %v, db3: %v; want true, false", last, h.mysql.byName("db2").has(last), db3.has(last))
	}

	// The cold start: every mysqld and agent stops; the lock lapses.
	for _, n := range h.names {
		h.mysql.byName(n).crash()
		h.unreachable[n] = true
	}
	h.clock.Step(10 * time.Second)

	// db3 comes back first, alone, then db2's agent, before its mysqld.
	restart := func(n string, mysqld bool) {
		if mysqld {
			d := h.mysql.byName(n)
			h.mysql.mu.Lock()
			d.up, d.readOnly = true, true
			h.mysql.mu.Unlock()
		}
		h.unreachable[n] = false
		h.startAgent(n)
	}
	restart("db3", true)
	h.advance(5*time.Second, "db3")
	if w := h.mysql.writable(); len(w) != 0 || h.holder() == "db3" {
		t.Fatalf("the least complete member took over while the others were still coming back: writable %v, holder %q", w, h.holder())
	}
	restart("db2", false)
	h.advance(5*time.Second, "db3", "db2")
	if w := h.mysql.writable(); len(w) != 0 || h.holder() == "db3" {
		t.Fatalf("db3 took over while db2's agent answered without its mysqld: writable %v, holder %q", w, h.holder())
	}
	restart("db2", true)
	restart("db1", true)
	h.advance(8*time.Second, "db3", "db2", "db1")
	// Whoever leads now holds every write: db3 may too, once its receiver
	// has reconnected to db1 and caught up.
	leader := h.holder()
	h.expectPrimary(leader)
	for _, n := range h.names {
		if !h.mysql.byName(n).has(last) {
			t.Fatalf("%s lacks %s after the cold start (%s leads)", n, last, leader)
		}
	}
}
