package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// agentctl restart restarts a replica's mysqld at once, and the leader's
// after a switchover: each mysqld exactly once, the cluster healthy after
// each, writes through the new primary, both restarts in the history. The
// test plays each mysqld's supervisor (the kubelet restarting the
// container).
func TestRestartReplicaThenLeader(t *testing.T) {
	c := NewCluster(t, Options{})
	p := c.WaitHealthy(60 * time.Second)
	c.EnsureTable(p)
	c.WriteAndReplicate(p, "before-restarts")

	r := c.Others(p)[0]
	restartOnce(t, c, r, nil)
	if got := c.WaitHealthy(60 * time.Second); got != p {
		t.Fatalf("after restarting the replica %s, %s leads; want %s still", r.Name, got.Name, p.Name)
	}
	c.WriteAndReplicate(p, "after-replica-restart")

	restartOnce(t, c, p, nil)
	np := c.WaitHealthy(60 * time.Second)
	if np == p {
		t.Fatalf("%s still leads after its restart: it must hand over first", p.Name)
	}
	c.WriteAndReplicate(np, "after-leader-restart")
	if !p.HasRow("after-leader-restart") {
		t.Fatalf("the restarted old leader %s does not replicate from %s", p.Name, np.Name)
	}
	for _, m := range []*Member{r, p} {
		if e := lastRestartEntry(t, c, m.Name); e["reason"] != "done" {
			t.Errorf("history's last restart of %s: %v, want reason done", m.Name, e)
		}
	}
}

// An agent killed while its mysqld is down for a restart leaves the
// request pending; the next agent sees that mysqld started after the
// request and finishes it without a second restart. The supervisor takes
// 6 s to start mysqld again, as after a long flush: a mysqld back within
// 5 s of the request is restarted again, since agentctl's clock may run
// behind the agent's (failover.RestartedSince).
func TestRestartSurvivesTheAgentsCrash(t *testing.T) {
	c := NewCluster(t, Options{})
	p := c.WaitHealthy(60 * time.Second)
	c.EnsureTable(p)
	r := c.Others(p)[0]
	restartOnce(t, c, r, func() {
		r.KillAgent()
		time.Sleep(6 * time.Second)
		go func() {
			// Started again once mysqld answers: it finds the request.
			time.Sleep(2 * time.Second)
			r.StartAgent()
		}()
	})
	c.WaitRejoined(60*time.Second, r, p)
	c.WriteAndReplicate(p, "after-crashed-restart")
	if e := lastRestartEntry(t, c, r.Name); e["reason"] != "done" {
		t.Errorf("history's last restart of %s: %v, want reason done", r.Name, e)
	}
}

// restartOnce runs agentctl restart m --wait while playing m's mysqld
// supervisor, which calls beforeStart before it starts mysqld again; it
// fails the test unless mysqld was restarted exactly once.
func restartOnce(t *testing.T, c *Cluster, m *Member, beforeStart func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restarts := superviseMySQLThen(ctx, t, m, beforeStart)
	start := time.Now()
	out := c.MustCtl("restart", m.Name, "--force", "--wait", "--wait-timeout=2m")
	t.Logf("agentctl restart %s took %v:\n%s", m.Name, time.Since(start).Round(time.Millisecond), out)
	// A second restart would follow at once: give it the time to show.
	time.Sleep(3 * time.Second)
	cancel()
	if n := <-restarts; n != 1 {
		t.Fatalf("mysqld of %s was restarted %d times, want once", m.Name, n)
	}
}

// lastRestartEntry is the newest restart entry of member in agentctl
// history -o json.
func lastRestartEntry(t *testing.T, c *Cluster, member string) map[string]any {
	t.Helper()
	var entries []map[string]any
	out := c.MustCtl("history", "-o", "json")
	if err := json.Unmarshal([]byte(out.Stdout), &entries); err != nil {
		t.Fatalf("agentctl history -o json: %v\n%s", err, out)
	}
	var last map[string]any
	for _, e := range entries {
		if e["kind"] == "restart" && e["to"] == member {
			last = e
		}
	}
	return last
}
