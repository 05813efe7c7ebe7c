package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every documented failure of agentctl, against a real cluster on etcd: the
// distinct exit code that `agentctl --help` lists (2 usage, 3 unknown member,
// 4 unhealthy target, 5 no leader, 6 request already pending, 7 timeout, 8
// DCS unreachable, 9 rejected) with a message that says what is wrong; the
// --help of every command shows an example, and history -o json is readable. The subtests share the cluster
// and run in order: the last one kills every agent.
func TestAgentctlErrors(t *testing.T) {
	c := NewCluster(t, Options{})
	primary := c.Bootstrap()
	members := strings.Join(names(c.Members), ", ")

	t.Run("usage", func(t *testing.T) {
		dcs := c.ctlArgs()[:2] // --dcs=etcd --etcd-endpoints=...
		cases := []struct {
			args []string
			want []string
		}{
			{nil, []string{"no command given"}},
			{c.ctlArgs(), []string{"no command given"}},
			{append(c.ctlArgs(), "frobnicate"), []string{`unknown command "frobnicate"`}},
			{append(slices.Clone(dcs), "status"), []string{"--cluster is required"}},
			{append(c.ctlArgs(), "status", "-o", "xml"), []string{`-o "xml"`, "table, wide, json or yaml"}},
			{append(c.ctlArgs(), "switchover", "--bogus"), []string{"flag provided but not defined: -bogus"}},
			{append(c.ctlArgs(), "status", "extra"), []string{"unexpected arguments", "extra"}},
			{append(c.ctlArgs(), "failover", "--force"), []string{"failover needs --to"}},
			{append(c.ctlArgs(), "--timeout=soon", "status"), []string{"invalid value", "timeout"}},
		}
		for _, tc := range cases {
			expectExit(t, runAgentctl(t, tc.args...), 2, tc.want...)
		}
		// Neither an unreachable nor a forbidden DCS: a flag value that
		// cannot work is a usage error.
		r := runAgentctl(t, "--dcs=zookeeper", "--cluster="+c.Name, "status")
		if r.Code == 8 {
			knownBug(t, "KB-CTL3", "an invalid --dcs value exits 8 (DCS unreachable), want 2 (usage):\n%s", r)
		} else {
			expectExit(t, r, 2, `--dcs "zookeeper"`)
		}
	})

	t.Run("help", func(t *testing.T) {
		r := runAgentctl(t, "--help")
		expectExit(t, r, 0)
		for _, want := range []string{"Usage: agentctl", "Examples:", "agentctl --cluster=demo switchover --to=demo-2 --wait",
			"Exit codes: 0 ok, 1 error, 2 usage, 3 unknown member, 4 unhealthy target, 5 no leader,"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("agentctl --help lacks %q on stdout:\n%s", want, r)
			}
		}
		for _, cmd := range []string{"status", "switchover", "failover", "pause", "resume", "history"} {
			example := "Example:\n  agentctl --cluster=demo " + cmd
			r := runAgentctl(t, append(c.ctlArgs(), cmd, "--help")...)
			if r.Code != 0 || !strings.Contains(r.Stdout, example) || !strings.Contains(r.Stdout, "Flags:") {
				t.Errorf("agentctl %s --help: want exit 0, an example (%q) and the flags, got:\n%s", cmd, example, r)
			}
			// The way an operator first asks: no global flags at all.
			r = runAgentctl(t, cmd, "--help")
			if r.Code != 0 || !strings.Contains(r.Stdout, example) {
				knownBug(t, "KB-CTL2", "`agentctl %s --help` without --cluster does not show the command's help:\n%s", cmd, r)
			}
		}
	})

	t.Run("dcs unreachable", func(t *testing.T) {
		port, err := freePort() // nothing listens there
		if err != nil {
			t.Fatal(err)
		}
		gone := fmt.Sprintf("http://127.0.0.1:%d", port)
		r := runAgentctl(t, "--dcs=etcd", "--etcd-endpoints="+gone, "--timeout=1s", "--cluster="+c.Name, "status")
		expectExit(t, r, 8, "unreachable")
		if r.Took() > 10*time.Second {
			t.Errorf("agentctl status took %v to give up on an unreachable etcd with --timeout=1s", ms(r.Took()))
		}
		kubeconfig := writeUnreachableKubeconfig(t, port)
		r = runAgentctl(t, "--dcs=kubernetes", "--kubeconfig="+kubeconfig, "--timeout=1s", "--cluster="+c.Name, "status")
		expectExit(t, r, 8, "unreachable")
		// The mutating commands read the cluster first, and must give up as
		// status does; run side by side, since the bug is that they never do.
		cmds := [][]string{{"switchover", "--to", primary.Name, "--force"}, {"pause"}}
		results := make([]CtlResult, len(cmds))
		finished := make([]bool, len(cmds))
		var wg sync.WaitGroup
		for i, args := range cmds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], finished[i] = runAgentctlWithin(t, 5*time.Second,
					append([]string{"--dcs=etcd", "--etcd-endpoints=" + gone, "--timeout=1s", "--cluster=" + c.Name}, args...)...)
			}()
		}
		wg.Wait()
		for i, r := range results {
			if !finished[i] {
				knownBug(t, "KB-CTL1", "agentctl %s on an unreachable etcd with --timeout=1s still ran after %v (killed): "+
					"it waits forever instead of exiting 8\n%s", cmds[i][0], ms(r.Took()), r)
				continue
			}
			expectExit(t, r, 8, "unreachable")
		}
	})

	t.Run("unknown member", func(t *testing.T) {
		r := c.Ctl("switchover", "--to", "nosuch", "--force")
		expectExit(t, r, 3, `unknown member "nosuch"`, "members are: "+members)
	})

	t.Run("rejected", func(t *testing.T) {
		expectExit(t, c.Ctl("switchover", "--to", primary.Name, "--force"), 9, primary.Name+" is already the leader")
		// A manual failover is for a cluster without a healthy leader.
		expectExit(t, c.Ctl("failover", "--to", c.Others(primary)[0].Name, "--force"), 9,
			primary.Name+" holds the lock and is healthy", "agentctl switchover")
		if cs := c.CtlStatus(); cs.Leader != primary.Name || cs.Switchover != nil {
			t.Errorf("after rejected requests: leader %q, pending %v; want %s and nothing pending", cs.Leader, cs.Switchover, primary.Name)
		}
	})

	// A replica whose agent runs with --nofailover may never lead.
	tagged := c.Others(primary)[0]
	t.Run("unhealthy target", func(t *testing.T) {
		tagged.restartAgentWith("--nofailover")
		waitFor(t, 30*time.Second, "agentctl status to show "+tagged.Name+" tagged nofailover", func() (bool, string) {
			st := c.CtlStatus()
			_, state, tags, _ := st.member(tagged.Name)
			return strings.Contains(tags, "nofailover") && state == "streaming", fmt.Sprintf("%+v", st)
		})
		r := c.Ctl("switchover", "--to", tagged.Name, "--force")
		expectExit(t, r, 4, tagged.Name+" cannot take over", "nofailover")
		if cs := c.CtlStatus(); cs.Leader != primary.Name || cs.Switchover != nil {
			t.Errorf("after the refused switchover: leader %q, pending %v; want %s and nothing pending", cs.Leader, cs.Switchover, primary.Name)
		}
	})

	// --wait gives up after --wait-timeout with 7; the request it wrote
	// stands, and the leader carries it out. The leader is frozen while
	// agentctl waits: a live one was seen to hand over within the 1 ms.
	second := c.Others(primary, tagged)[0]
	t.Run("timeout", func(t *testing.T) {
		primary.FreezeAgent()
		r := c.Ctl("switchover", "--to", second.Name, "--force", "--wait", "--wait-timeout=1ms")
		primary.ThawAgent()
		expectExit(t, r, 7, "timed out")
		if !strings.Contains(r.Stdout, "Switchover requested: "+primary.Name+" -> "+second.Name) {
			t.Errorf("agentctl did not report the request it wrote before waiting:\n%s", r)
		}
		// The request stands.
		c.WaitPrimary(30*time.Second, second)
	})

	// -o json is for scripts: the entry of that switchover, by name.
	t.Run("history json", func(t *testing.T) {
		var r CtlResult
		waitFor(t, 10*time.Second, "agentctl history to list the switchover", func() (bool, string) {
			r = c.MustCtl("history")
			return historyHas(r.Stdout, "switchover", primary.Name, second.Name), r.String()
		})
		checkHistoryJSON(t, c.MustCtl("history", "-o", "json"), "switchover", primary.Name, second.Name)
	})

	// A request is pending from when agentctl writes it until the leader
	// takes it up, which a live leader does at once; a frozen one (SIGSTOP)
	// holds it pending, deterministically, for as long as its lock stays
	// valid (ttl after its last renewal).
	t.Run("pending", func(t *testing.T) {
		leader := c.WaitHealthy(30 * time.Second)
		to := c.Others(leader, tagged)[0]
		frozen := time.Now()
		leader.FreezeAgent()
		defer func() {
			if leader.isFrozen() {
				leader.ThawAgent()
			}
		}()
		r := c.Ctl("switchover", "--to", to.Name, "--force")
		expectExit(t, r, 0)
		r = c.Ctl("switchover", "--to", to.Name, "--force")
		expectExit(t, r, 6, "already pending", "to "+to.Name, "agentctl switchover --cancel")
		r = c.Ctl("switchover", "--force")
		expectExit(t, r, 6, "already pending")
		cs := c.CtlStatus()
		held := time.Since(frozen)
		leader.ThawAgent()
		if cs.Switchover == nil || cs.Switchover.To != to.Name || cs.Switchover.From != leader.Name {
			t.Errorf("agentctl status: pending switchover %+v, want %s -> %s", cs.Switchover, leader.Name, to.Name)
		}
		if held > c.Timing.TTL-c.Timing.SafetyMargin-c.Timing.RetryTimeout {
			t.Logf("the leader was frozen for %v, longer than intended: its lock may have lapsed meanwhile", ms(held))
		}
		// Thawed, the leader carries the request out.
		c.WaitPrimary(30*time.Second, to)
		if cs := c.CtlStatus(); cs.Switchover != nil {
			t.Errorf("the carried-out request is still pending: %+v", cs.Switchover)
		}
	})

	// agentctl restart's refusals, as printed, and a request pending
	// while the member's agent is frozen, withdrawn with --cancel.
	t.Run("restart", func(t *testing.T) {
		leader := c.WaitHealthy(30 * time.Second)
		replica := c.Others(leader, tagged)[0]
		for _, tc := range []struct {
			args []string
			code int
			want []string
		}{
			{[]string{"restart", "nosuch", "--force"}, 3, []string{`unknown member "nosuch"`, "members are: " + members}},
			{[]string{"restart", replica.Name, "--to", tagged.Name, "--force"}, 2, []string{"--to names the member that takes over from a leader", replica.Name + " does not lead"}},
			{[]string{"restart", leader.Name, "--to", leader.Name, "--force"}, 2, []string{"give another member"}},
			{[]string{"restart", leader.Name, "--to", tagged.Name, "--force"}, 4, []string{tagged.Name + " cannot take over from " + leader.Name, "nofailover"}},
			{[]string{"restart", replica.Name, "--cancel"}, 9, []string{"no restart request is pending"}},
		} {
			r := c.Ctl(tc.args...)
			t.Logf("%s", r)
			expectExit(t, r, tc.code, tc.want...)
		}
		replica.FreezeAgent()
		defer func() {
			if replica.isFrozen() {
				replica.ThawAgent()
			}
		}()
		expectExit(t, c.Ctl("restart", replica.Name, "--force"), 0)
		r := c.Ctl("restart", tagged.Name, "--force")
		t.Logf("%s", r)
		expectExit(t, r, 6, "a restart of "+replica.Name+" is already pending", "agentctl restart "+replica.Name+" --cancel")
		r = c.Ctl("restart", replica.Name, "--cancel")
		t.Logf("%s", r)
		expectExit(t, r, 0)
		replica.ThawAgent()
		if cs := c.CtlStatus(); cs.Leader != leader.Name {
			t.Errorf("after the restart requests: leader %q, want %s", cs.Leader, leader.Name)
		}
	})

	t.Run("no leader", func(t *testing.T) {
		for _, m := range c.Members {
			m.KillAgent()
		}
		// The lock's etcd lease lapses ttl after the last renewal.
		waitFor(t, c.Timing.TTL+10*time.Second, "the dead leader's lock to expire", func() (bool, string) {
			h, err := c.LeaderHolder()
			return err == nil && h == "", fmt.Sprintf("holder %q (err %v)", h, err)
		})
		expectExit(t, c.Ctl("switchover", "--to", second.Name, "--force"), 5, "no healthy leader", "agentctl failover")
		expectExit(t, c.Ctl("switchover", "--force"), 5, "no healthy leader")
	})
}

// WaitPrimary waits for the steady state of Healthy with want as the
// primary.
func (c *Cluster) WaitPrimary(timeout time.Duration, want *Member, skip ...*Member) {
	c.tb.Helper()
	waitFor(c.tb, timeout, want.Name+" as the writable primary, with streaming read-only replicas", func() (bool, string) {
		p, ok, detail := c.Healthy(skip...)
		if ok && p != want {
			return false, fmt.Sprintf("the primary is %s\n%s", p.Name, c.describe())
		}
		return ok, detail
	})
}

// restartAgentWith restarts m's agent with extra flags appended to its
// command line, for this and every later start.
func (m *Member) restartAgentWith(extra ...string) {
	m.mu.Lock()
	m.args = append(m.args, extra...)
	m.mu.Unlock()
	m.RestartAgent()
}

// writeUnreachableKubeconfig writes a kubeconfig for an API server on a
// loopback port nothing listens on.
func writeUnreachableKubeconfig(tb testing.TB, port int) string {
	tb.Helper()
	path := tb.TempDir() + "/unreachable.kubeconfig"
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: operator
  user:
    token: unused
contexts:
- name: gone
  context: {cluster: gone, user: operator, namespace: default}
current-context: gone
`, port)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
