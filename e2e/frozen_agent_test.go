package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// SIGSTOP of the primary's agent for longer than ttl (a GC pause, a stalled
// node), then SIGCONT. Its mysqld stays up. Meanwhile a replica takes the
// lock, fences the old mysqld remotely and becomes the primary. When the old
// agent wakes past its deadline it must fence before doing anything else,
// and then follow the new primary. Never two writable servers.
func TestFrozenPrimaryAgent(t *testing.T) {
	c := NewCluster(t, Options{})
	old := c.Bootstrap()
	sb := c.StartMonitor()
	c.WriteAndReplicate(old, "before-freeze")
	survivors := c.Others(old)
	const selfFences = `mysqlha_fencing_actions_total{kind="self-deadline"}`
	fencesBefore, _ := old.Metric(selfFences)

	frozen := time.Now()
	old.FreezeAgent()
	var (
		mu     sync.Mutex
		oldRO  bool
		oldErr error
	)
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	win := FirstWriteThen(survivors, "frozen", 20*time.Millisecond, limit, func(WriteWin) {
		ro, err := old.ReadOnly()
		mu.Lock()
		oldRO, oldErr = ro, err
		mu.Unlock()
	})
	if win.Member == nil {
		t.Fatalf("no survivor accepted an application write within %v of freezing %s's agent\n%s", limit, old.Name, c.describe())
	}
	newPrimary := win.Member
	t.Logf("%s accepted the first write %v after %s's agent was frozen", newPrimary.Name,
		win.At.Sub(frozen).Round(time.Millisecond), old.Name)
	mu.Lock()
	if oldErr != nil || !oldRO {
		t.Errorf("when %s acknowledged its first write, the frozen primary's mysqld %s had read_only=%v (err %v)",
			newPrimary.Name, old.Name, oldRO, oldErr)
	}
	mu.Unlock()
	if p := c.WaitHealthy(30*time.Second, old); p != newPrimary {
		t.Fatalf("the API names %s the primary, but %s took the first write", p.Name, newPrimary.Name)
	}
	c.WriteAndReplicate(newPrimary, "while-frozen", old)

	// Stay frozen for longer than ttl in any case: the point is an agent
	// that wakes up well past its deadline.
	if d := c.Timing.TTL + c.Timing.LoopWait - time.Since(frozen); d > 0 {
		time.Sleep(d)
	}
	// A load balancer's health check that arrives while the agent is frozen
	// is answered the moment it wakes: it must not be told "primary".
	queued := queryWhenThawed(old, "/primary")
	time.Sleep(200 * time.Millisecond) // let the request reach the frozen agent's socket
	thawed := time.Now()
	old.ThawAgent()
	t.Logf("%s's agent thawed after %v", old.Name, thawed.Sub(frozen).Round(time.Millisecond))
	if a := <-queued; a.err != nil {
		t.Errorf("GET /primary sent to %s's frozen agent failed after the thaw: %v", old.Name, a.err)
	} else if a.code == http.StatusOK {
		knownBug(t, "KB1", "GET /primary sent to %s's frozen agent was answered 200 %v after the thaw, "+
			"want 503: the agent is past its lock deadline and no longer the primary:\n%s", old.Name,
			a.at.Sub(thawed).Round(time.Millisecond), strings.TrimSpace(a.body))
	} else {
		t.Logf("known bug KB1 did not reproduce: /primary answered %d after the thaw (fixed? then make it a plain check)", a.code)
	}

	waitFor(t, 5*time.Second, old.Name+"'s agent to count its own deadline fence", func() (bool, string) {
		v, ok := old.Metric(selfFences)
		return ok && v > fencesBefore, old.Name + ": " + selfFences + " did not increase"
	})
	if p := c.WaitHealthy(30 * time.Second); p != newPrimary {
		t.Fatalf("after the thaw the primary is %s, want %s", p.Name, newPrimary.Name)
	}
	c.WriteAndReplicate(newPrimary, "after-thaw")
	checkFencedFirst(t, old.LogSince("SIGCONT agent"))

	sb.Stop()
	sb.ExpectAlive()
	// Once fenced by the new primary, the old server stays read-only: its
	// agent, waking up, must not undo that.
	var fenced time.Time
	for _, e := range sb.Events() {
		switch {
		case e.Member != old.Name || e.At.Before(frozen):
		case !e.Writable && fenced.IsZero():
			fenced = e.At
		case e.Writable && !fenced.IsZero():
			t.Errorf("%s was fenced at %s, but writable again at %s", old.Name, stamp(fenced), stamp(e.At))
		}
	}
	if fenced.IsZero() {
		t.Errorf("the monitor never saw %s read-only after its agent was frozen:\n%s", old.Name, sb.Timeline())
	}
}

type apiAnswer struct {
	code int
	body string
	err  error
	at   time.Time
}

// queryWhenThawed sends GET path to a (frozen) agent and delivers the answer,
// however late; the client waits up to 30 s.
func queryWhenThawed(m *Member, path string) <-chan apiAnswer {
	ch := make(chan apiAnswer, 1)
	go func() {
		cl := &http.Client{Timeout: 30 * time.Second, Transport: m.c.http.Transport}
		resp, err := cl.Get(m.APIURL + path)
		a := apiAnswer{err: err, at: time.Now()}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a.code, a.body = resp.StatusCode, string(b)
		}
		ch <- a
	}()
	return ch
}

// checkFencedFirst reads an agent's log lines after a thaw and checks that
// it logged a fence of its mysqld before any line that reports an action on
// the cluster (a decision, replication, a role, the lock, a promotion).
func checkFencedFirst(t *testing.T, lines []string) {
	t.Helper()
	acts := []string{"decision", "replicating from the leader", "won the leader lock", "promoted", "handed the lock over"}
	for i, line := range lines {
		var rec struct {
			Msg string `json:"msg"`
			To  string `json:"to"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if strings.Contains(rec.Msg, "fenc") {
			return
		}
		action := rec.Msg == "role changed" && rec.To != ""
		for _, a := range acts {
			action = action || strings.HasPrefix(rec.Msg, a)
		}
		if action {
			t.Errorf("after the thaw the agent acted before fencing: line %d %s\nlog after the thaw:\n%s",
				i+1, line, strings.Join(lines[:min(len(lines), i+10)], "\n"))
			return
		}
	}
	t.Errorf("no fencing line in the agent log after the thaw:\n%s", strings.Join(lines[:min(len(lines), 30)], "\n"))
}
