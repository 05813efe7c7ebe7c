package agent

import (
	"strings"
	"testing"
	"time"
)

// stepUntil steps the given agents every quarter loop_wait until cond
// holds, and returns how long that took on the harness clock; it fails
// after limit.
func (h *loopHarness) stepUntil(limit time.Duration, what string, cond func() bool, names ...string) time.Duration {
	h.t.Helper()
	start := h.clock.Now()
	for !cond() {
		if h.clock.Since(start) > limit {
			h.t.Fatalf("%s did not happen within %s (holder %q, writable %v)", what, limit, h.holder(), h.mysql.writable())
		}
		h.clock.Step(h.config.LoopWait / 4)
		h.step(names...)
	}
	return h.clock.Since(start)
}

// kill9 is a node's death: name's agent and mysqld are gone.
func (h *loopHarness) kill9(name string) {
	h.killAgent(name)
	h.mysql.byName(name).up = false
}

// In lossless mode the primary's death (agent and server) is confirmed by
// both replicas within about a window, and the best takes the lock over
// long before its ttl.
func TestLoopLosslessConfirmedDeathTakesOverBeforeTTL(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	h.kill9("db1")
	took := h.stepUntil(h.config.TTL, "a take-over", func() bool {
		w := h.mysql.writable()
		return len(w) == 1 && w[0] != "db1"
	}, "db2", "db3")
	if bound := h.config.TTL / 2; took > bound {
		t.Errorf("took %s, want under %s (ttl %s)", took, bound, h.config.TTL)
	}
	if !h.hasEvent(h.holder(), "LeaderLost") {
		t.Error("no LeaderLost event")
	}
}

// A primary whose agent is dead but whose server still streams to its
// replicas is not confirmed dead: its lock is taken only once it expires.
func TestLoopLosslessDeadAgentLiveServerWaitsForTTL(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	h.killAgent("db1")
	h.stepUntil(3*h.config.TTL, "the usual failover", func() bool {
		w := h.mysql.writable()
		return len(w) == 1 && w[0] != "db1"
	}, "db2", "db3")
	if took := h.clock.Since(h.agents["db1"].lastRenewStart); took < h.config.TTL {
		t.Errorf("the lock moved %s after db1's last renewal, before its ttl %s", took, h.config.TTL)
	}
}

// A primary cut off from its peers' servers, whose agent still answers
// (a cut between servers only, or a primary too slow to stream): its
// replicas lose the stream, but its agent answers, so it is no death, and
// it keeps leading (stalled, in strict mode) under a valid lock.
func TestLoopLosslessLostStreamLiveAgentIsNotDead(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	h.mysql.byName("db1").cutFromPeers = true
	h.advance(3*h.config.TTL, h.names...)
	if h.holder() != "db1" {
		t.Fatalf("holder %q: the lock of a live leader moved", h.holder())
	}
	for _, n := range []string{"db2", "db3"} {
		if h.agents[n].watch.lostSince.IsZero() == false {
			t.Errorf("%s counts db1 lost although its agent answers", n)
		}
	}
}

// Without a majority (the other replica's agent is dead too) nobody takes
// over before the ttl.
func TestLoopLosslessNoMajorityNoTakeOver(t *testing.T) {
	h := newLoopHarnessWith(t, strictConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	h.killAgent("db3")
	h.kill9("db1")
	start := h.clock.Now()
	h.stepUntil(4*h.config.TTL, "a failover", func() bool {
		w := h.mysql.writable()
		return len(w) == 1 && w[0] != "db1"
	}, "db2")
	if took := h.clock.Since(start); took < h.config.TTL-2*h.config.LoopWait {
		t.Errorf("db2 took over after %s, alone, before the lock could expire", took)
	}
}

// In asynchronous mode a primary whose pod the kubelet reports with every
// container stopped (kill -9 of the pod) is taken over before its ttl; a
// primary whose agent is frozen (its containers run) or whose pod of that
// name is a new one (deleted and made again, the old one's containers
// maybe running on a cut-off node) waits for the ttl, as before.
func TestLoopAsyncPodDownTakenOverBeforeTTL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		downUID string // the UID the kubelet reports stopped; "" none
		early   bool
	}{
		{"every container stopped", "uid-db1", true},
		{"frozen agent: containers run", "", false},
		{"a new pod of that name stopped, not the holder's", "uid-db1-new", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLoopHarness(t, "db1", "db2", "db3")
			h.bootstrap()
			h.round() // the records carry the pods' UIDs
			h.killAgent("db1")
			if tc.early {
				h.mysql.byName("db1").crash()
			} else {
				h.mysql.byName("db1").cutFromPeers = true // alive: no stream, no answer, as a frozen pod whose server still runs
			}
			if tc.downUID != "" {
				h.labels.mu.Lock()
				h.labels.down["db1"] = tc.downUID
				h.labels.mu.Unlock()
			}
			ttl := h.config.TTL
			for elapsed := time.Duration(0); elapsed < ttl-time.Second; elapsed += 250 * time.Millisecond {
				h.clock.Step(250 * time.Millisecond)
				h.step("db2", "db3")
			}
			took := h.holder() != "db1"
			if took != tc.early {
				t.Fatalf("holder %q %s before the ttl; want a take-over: %v", h.holder(), "(writable "+strings.Join(h.mysql.writable(), ",")+")", tc.early)
			}
			if tc.early {
				if w := h.mysql.writable(); len(w) != 1 || w[0] != h.holder() {
					t.Fatalf("writable %v after the take-over, want the holder %s", w, h.holder())
				}
				if !h.hasEvent(h.holder(), "LeaderLost") {
					t.Fatal("no LeaderLost Event for the take-over")
				}
			}
		})
	}
}

// After the take-over of a pod the kubelet reports stopped, the promotion
// does not dial the dead pod's address: the pod's network is gone with it,
// so each dial would hang for the whole probe bound (retry_timeout) and
// cost a second an iteration, for nothing a stopped mysqld could answer.
// The member counts as down, not as unverified.
func TestLoopPodDownPromotionDoesNotWaitForTheDeadPod(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	h.killAgent("db1")
	old := h.mysql.byName("db1")
	old.crash()
	old.c.mu.Lock()
	old.unreachable = true // its address answers nothing: dials time out
	old.c.mu.Unlock()
	h.labels.mu.Lock()
	h.labels.down["db1"] = "uid-db1"
	h.labels.mu.Unlock()
	h.mysql.mu.Lock()
	before := old.contacts // its own agent is dead: every contact is a peer's
	h.mysql.mu.Unlock()
	tookOver := false
	for elapsed := time.Duration(0); elapsed < h.config.TTL-time.Second && !tookOver; elapsed += 250 * time.Millisecond {
		h.clock.Step(250 * time.Millisecond)
		h.step("db2", "db3")
		tookOver = h.holder() != "db1"
	}
	if !tookOver {
		t.Fatal("no take-over before the ttl")
	}
	newHolder := h.holder()
	h.stepUntil(h.config.TTL, "the new holder writable", func() bool {
		w := h.mysql.writable()
		return len(w) == 1 && w[0] == newHolder
	}, "db2", "db3")
	h.mysql.mu.Lock()
	contacts := old.contacts - before
	h.mysql.mu.Unlock()
	if contacts != 0 {
		t.Errorf("the promotion tried the dead pod's server %d times", contacts)
	}
	if h.hasEvent(newHolder, "UnverifiedFence") {
		t.Error("the dead pod's member was promoted over as unverified, not as down")
	}
}
