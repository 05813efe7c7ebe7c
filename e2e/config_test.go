package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Runtime configuration on etcd: `agentctl set-config ttl=10s loop_wait=3s`
// takes effect in the running agents (same processes): the leader renews
// its lock with the new ttl and judges its deadline by it, every loop runs
// at the new period, and the history records the change. A bad value is
// refused with the agents' own start-up error and changes nothing. Then
// `agentctl remove` refuses the leader and a live replica, and removes a
// member whose agent died.
func TestRuntimeConfig(t *testing.T) {
	c := NewCluster(t, Options{})
	primary := c.Bootstrap()
	pids := map[string]int{}
	for _, m := range c.Members {
		pids[m.Name] = m.Pid()
	}
	if ttl, granted := c.leaderLeaseTTL(t); ttl != 5 || granted != 5 {
		t.Fatalf("before: leader key ttl_seconds %d on a %d s lease, want 5 and 5", ttl, granted)
	}
	before := loopGaps(t, c.Members, 6*time.Second)
	for name, gap := range before {
		if gap > 1600*time.Millisecond {
			t.Errorf("before: %s's loop paused %v between iterations, want about loop_wait 1s", name, ms(gap))
		}
	}

	// Refused: an impossible timing, with the message an agent started
	// with it prints; a bad duration; an unknown key. Nothing is applied.
	startup := agentStartupError(t, c.Members[0], "--ttl=5s", "--loop-wait=5s")
	rule := timingRule(startup)
	if rule == "" {
		t.Fatalf("the agent started with --loop-wait=5s --ttl=5s did not state the timing rule:\n%s", startup)
	}
	expectExit(t, c.Ctl("set-config", "loop_wait=5s"), 2, rule, "nothing was changed")
	expectExit(t, c.Ctl("set-config", "ttl=10s", "loop_wait=fast"), 2, "loop_wait=fast is not a duration", "nothing was changed")
	expectExit(t, c.Ctl("set-config", "ttl=10s", "tll=10s"), 2, `unknown config key "tll"; the keys are ttl, loop_wait`)
	if cfg := c.showConfig(); cfg["ttl"] != "5s" || cfg["loop_wait"] != "1s" {
		t.Fatalf("refused changes were applied: %v", cfg)
	}

	for _, m := range c.Members {
		m.mark("set-config ttl=10s loop_wait=3s")
	}
	changed := time.Now()
	r := c.MustCtl("set-config", "ttl=10s", "loop_wait=3s")
	if !strings.Contains(r.Stdout, "ttl: 5s -> 10s, loop_wait: 1s -> 3s") {
		t.Errorf("set-config output lacks the changes:\n%s", r)
	}

	// Every agent adopts it; the leader renews with the new ttl (its key is
	// rebound to a 10 s lease) and its deadline follows: ttl - safety_margin
	// - retry_timeout = 8 s at a renewal, never above 3 s with ttl 5 s.
	for _, m := range c.Members {
		waitFor(t, 15*time.Second, m.Name+" to log the adopted config", func() (bool, string) {
			for _, line := range m.LogSince("set-config ttl=10s") {
				if strings.Contains(line, "adopted a changed cluster config") && strings.Contains(line, "ttl: 5s -> 10s") {
					return true, ""
				}
			}
			return false, "no \"adopted a changed cluster config\" line since the change"
		})
	}
	waitFor(t, 15*time.Second, "the leader's key on a 10 s lease", func() (bool, string) {
		ttl, granted := c.leaderLeaseTTL(t)
		return ttl == 10 && granted == 10, fmt.Sprintf("ttl_seconds %d, lease granted %d s", ttl, granted)
	})
	t.Logf("the leader renewed with ttl 10s %v after set-config", ms(time.Since(changed)))
	waitFor(t, 10*time.Second, "the leader's deadline to follow ttl 10s", func() (bool, string) {
		st := liveStatus(primary)
		return st.SecondsToFence > 6, fmt.Sprintf("seconds_to_fence %.1f", st.SecondsToFence)
	})
	after := loopGaps(t, c.Members, 12*time.Second)
	t.Logf("longest pause between loop iterations: %v with loop_wait 1s, %v with loop_wait 3s", before, after)
	for name, gap := range after {
		if gap < 2500*time.Millisecond || gap > 3600*time.Millisecond {
			t.Errorf("after: %s's longest pause between iterations is %v, want about loop_wait 3s", name, ms(gap))
		}
	}
	for _, m := range c.Members {
		if m.Pid() != pids[m.Name] {
			t.Errorf("%s's agent was restarted (pid %d, was %d)", m.Name, m.Pid(), pids[m.Name])
		}
	}
	if cfg := c.showConfig(); cfg["ttl"] != "10s" || cfg["loop_wait"] != "3s" || cfg["retry_timeout"] != "1s" {
		t.Errorf("show-config after the change: %v", cfg)
	}
	c.checkConfigHistory("ttl: 5s -> 10s, loop_wait: 1s -> 3s")
	c.WriteAndReplicate(primary, "after-set-config")

	// remove: the leader and a live replica are refused; a member whose
	// agent died goes once its etcd session has lapsed.
	replicas := c.Others(primary)
	live, gone := replicas[0], replicas[1]
	expectExit(t, c.Ctl("remove", primary.Name), 9, primary.Name+" holds the leader lock")
	r = c.Ctl("remove", live.Name)
	expectExit(t, r, 9, live.Name+" is live: its agent rewrote its record")
	t.Logf("remove of the live %s refused after %v", live.Name, ms(r.Took()))
	gone.KillAgent()
	gone.KillMySQL()
	r = c.Ctl("remove", gone.Name)
	expectExit(t, r, 0)
	t.Logf("remove of the stopped %s returned after %v:\n%s", gone.Name, ms(r.Took()), r.Stdout)
	if st := c.CtlStatus(); len(st.Members) != 2 {
		t.Errorf("agentctl status after the removal lists %d members, want 2: %+v", len(st.Members), st.Members)
	} else if _, _, _, ok := st.member(gone.Name); ok {
		t.Errorf("agentctl status still lists %s", gone.Name)
	}
	if n := c.etcdCount(t, "/mysqlha/"+c.Name+"/members/"+gone.Name); n != 0 {
		t.Errorf("%s's member key is still in etcd", gone.Name)
	}
	expectExit(t, c.Ctl("remove", gone.Name), 3, fmt.Sprintf("unknown member %q", gone.Name))
	c.WriteAndReplicate(primary, "after-remove", gone)
}

// leaderLeaseTTL reads the leader key: the ttl its holder declared and the
// TTL etcd granted the lease it is bound to.
func (c *Cluster) leaderLeaseTTL(t *testing.T) (declared, granted int64) {
	t.Helper()
	ctx, cancel := ctxFor(2 * time.Second)
	defer cancel()
	resp, err := c.etcd.Get(ctx, c.leaderKey())
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("reading the leader key: %v (%d keys)", err, len(resp.Kvs))
	}
	var v struct {
		TTLSeconds int64 `json:"ttl_seconds"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
		t.Fatalf("the leader key: %v", err)
	}
	lease, err := c.etcd.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatalf("the leader key's lease: %v", err)
	}
	return v.TTLSeconds, lease.GrantedTTL
}

func (c *Cluster) etcdCount(t *testing.T, key string) int64 {
	t.Helper()
	ctx, cancel := ctxFor(2 * time.Second)
	defer cancel()
	resp, err := c.etcd.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return resp.Count
}

// loopStatus is the part of GET /status that shows the loop's pace.
type loopStatus struct {
	LastLoop       string  `json:"last_loop"`
	SecondsToFence float64 `json:"seconds_to_fence"`
}

func liveStatus(m *Member) loopStatus {
	var st loopStatus
	if code, b, err := m.get("/status"); err == nil && code == http.StatusOK {
		json.Unmarshal(b, &st)
	}
	return st
}

// loopGaps watches every member's /status for d and returns, per member,
// the longest time between two of its loop iterations (last_loop).
func loopGaps(t *testing.T, members []*Member, d time.Duration) map[string]time.Duration {
	t.Helper()
	last := map[string]time.Time{}
	gaps := map[string]time.Duration{}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, m := range members {
			at, err := time.Parse(time.RFC3339Nano, liveStatus(m).LastLoop)
			if err != nil {
				continue
			}
			if prev, ok := last[m.Name]; ok && at.After(prev) {
				gaps[m.Name] = max(gaps[m.Name], at.Sub(prev))
			}
			last[m.Name] = at
		}
	}
	for _, m := range members {
		if _, ok := gaps[m.Name]; !ok {
			t.Fatalf("%s's loop did not run twice in %v", m.Name, d)
		}
	}
	return gaps
}

// agentStartupError runs m's agent command line with extra flags (later
// flags win), which must make it refuse to start, and returns its output.
func agentStartupError(t *testing.T, m *Member, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append(append([]string(nil), m.args[1:]...), extra...)
	out, err := exec.CommandContext(ctx, m.args[0], args...).CombinedOutput()
	if err == nil {
		t.Fatalf("the agent started with %v although they are invalid:\n%s", extra, out)
	}
	return string(out)
}

// timingRule is the statement of the timing rule, with its values, in an
// error message ("" when absent).
func timingRule(msg string) string {
	return regexp.MustCompile(`loop_wait \+ 2\*retry_timeout <= ttl - safety_margin must hold, got [^\n]*`).FindString(msg)
}

// showConfig runs `agentctl show-config -o json`.
func (c *Cluster) showConfig() map[string]any {
	c.tb.Helper()
	r := c.MustCtl("show-config", "-o", "json")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &cfg); err != nil {
		c.tb.Fatalf("agentctl show-config -o json: %v\n%s", err, r)
	}
	return cfg
}

// checkConfigHistory checks that both forms of `agentctl history` show a
// config change with reason.
func (c *Cluster) checkConfigHistory(reason string) {
	c.tb.Helper()
	r := c.MustCtl("history", "-o", "json")
	var entries []struct {
		Kind, From, To, Reason string
	}
	if err := json.Unmarshal([]byte(r.Stdout), &entries); err != nil {
		c.tb.Fatalf("agentctl history -o json: %v\n%s", err, r)
	}
	found := false
	for _, e := range entries {
		found = found || e.Kind == "config" && e.Reason == reason && e.From == "" && e.To == ""
	}
	if !found {
		c.tb.Errorf("agentctl history -o json lacks the config change %q:\n%s", reason, r)
	}
	if r := c.MustCtl("history"); !strings.Contains(r.Stdout, "config") || !strings.Contains(r.Stdout, reason) {
		c.tb.Errorf("agentctl history lacks the config change %q:\n%s", reason, r)
	}
}
