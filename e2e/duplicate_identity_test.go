package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/testenv/localproc"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// A second agent started with the --name of a live member, on a mysqld of
// its own (db4): the misconfiguration that, reproduced by hand, promoted
// the impostor's mysqld. The impostor must refuse to act: its mysqld stays
// read-only, it publishes nothing, and it says why (/status duplicate,
// mysqlha_duplicate_identity 1). The real member is never displaced.
//
//  1. The impostor takes the live leader's name, for 10 s: the same agent
//     instance keeps the lock, writes keep being acknowledged on it.
//  2. The impostor takes a replica's name; then the real leader dies (kill -9
//     of its agent and mysqld): a real member takes over, never the
//     impostor, and nothing acknowledged is lost.
//
// The cluster runs semi-synchronous replication (--semi-sync=on) so that
// nothing acknowledged may be lost when the leader's mysqld dies under the
// write load: every acknowledged write is then on a live replica, and the
// agents promote the one that has the most. With asynchronous replication
// the last writes before a crash are lost by design.
func TestDuplicateIdentity(t *testing.T) {
	c := NewCluster(t, Options{AgentArgs: []string{"--semi-sync=on"}})
	rep := NewInjections(t, "duplicate_identity")
	leader := c.Bootstrap()
	c.CreateLoadTable(leader)
	w := c.StartWriter(1, nil)
	w.WaitAcks(t, 10*time.Second, leader.Name, time.Time{}, 20)
	imp := c.launchImpostorServer(t)

	// 1. The leader's name.
	holder, instance := c.leaderRecord(t)
	impA := c.newImpostor(t, imp, leader.Name)
	sbA := c.StartMonitor(impA)
	rep.Watch(sbA)
	rep.Trial()
	started := time.Now()
	c.watchImpostor(t, impA, leader, 10*time.Second)
	rep.Outage(expectSteadyWrites(t, w, leader, started, time.Now(), "while the impostor ran"))
	impA.StopAgent()
	if h, i := c.leaderRecord(t); h != holder || i != instance {
		t.Errorf("after the impostor stopped, the leader key names %q instance %q; want %q instance %q", h, i, holder, instance)
	}
	sbA.Stop()
	sbA.ExpectAlive()
	c.expectNeverWritable(sbA, impA)

	// 2. A replica's name (the one the tie-break favours), then the leader
	// dies.
	victim := c.Others(leader)[0]
	victimInstance := victim.Status().Instance
	impB := c.newImpostor(t, imp, victim.Name)
	sbB := c.StartMonitor(impB)
	rep.Watch(sbB)
	rep.Trial()
	started = time.Now()
	c.watchImpostor(t, impB, leader, 5*time.Second)
	expectSteadyWrites(t, w, leader, started, time.Now(), "while the impostor ran")
	c.WaitHealthy(10 * time.Second)

	killed := time.Now()
	leader.KillAgent()
	leader.KillMySQL()
	limit := c.Timing.TTL + 2*c.Timing.LoopWait + 10*time.Second
	var first Ack
	waitFor(t, limit, "a member to acknowledge a write after the leader died", func() (bool, string) {
		for _, a := range w.Acks() {
			if a.Member != leader.Name && a.At.After(killed) {
				first = a
				return true, ""
			}
		}
		return false, c.describe()
	})
	newPrimary := c.WaitHealthy(30*time.Second, leader)
	if newPrimary.Name != first.Member {
		t.Fatalf("%s took the first write after the leader died, but %s is the primary", first.Member, newPrimary.Name)
	}
	t.Logf("%s took over: first write %v after %s died", newPrimary.Name, ms(first.At.Sub(killed)), leader.Name)
	h, i := c.leaderRecord(t)
	if want := newPrimary.Status().Instance; h != newPrimary.Name || i != want {
		t.Errorf("leader key: holder %q instance %q; want %s's agent, instance %q", h, i, newPrimary.Name, want)
	}
	if i == impB.Status().Instance {
		t.Errorf("the impostor's agent (instance %q) holds the lock", i)
	}
	if victim.Status().Instance != victimInstance {
		t.Errorf("%s's agent instance changed from %q to %q", victim.Name, victimInstance, victim.Status().Instance)
	}
	if !impB.MustReadOnly(t) || impB.IsPrimaryAPI() {
		t.Errorf("the impostor's mysqld %s is writable or its agent claims the primary: %s", impB.Name, impB.Status())
	}
	w.WaitAcks(t, 10*time.Second, newPrimary.Name, killed, 20)
	w.Stop()
	var prev Ack
	for _, a := range w.Acks() {
		if a.ID < first.ID {
			prev = a
		}
	}
	rep.Outage(first.At.Sub(prev.At))
	acks := w.Acks()
	// The dead leader aside, every member has every acknowledged write.
	finals := c.Finals(10*time.Second, acks, newPrimary, c.Others(leader, newPrimary)...)
	c.expectRefusing(t, impB, victim.Name)
	impB.StopAgent()
	rep.AckedLost(len(sbB.Judge(acks, finals, checker.Expect{}).Lost))
	sbB.ExpectAlive()
	c.expectNeverWritable(sbB, impB)

	// The dead leader comes back. Killed under load, it may have committed
	// a transaction that no replica received (its client was never
	// answered: semi-sync waits after the local commit); then it is errant
	// and must say so instead of following.
	leader.RestartMySQL()
	ahead, err := c.unreplicated(leader, newPrimary)
	if err != nil {
		t.Fatal(err)
	}
	leader.StartAgent()
	if ahead != "" {
		t.Logf("%s's binary log has %s, which %s never received: a commit in flight when it was killed", leader.Name, ahead, newPrimary.Name)
		c.expectErrantReported(t, leader, ahead)
		return
	}
	c.WaitRejoined(30*time.Second, leader, newPrimary)
	c.JudgeWrites("after "+leader.Name+" rejoined", acks, c.Finals(10*time.Second, acks, newPrimary, c.Others(newPrimary)...))
	c.ExpectSameGTIDs(newPrimary, "duplicate-identity-end")
}

// expectErrantReported waits for m's agent to report the errant
// transactions ahead (README: a replica whose source lacks what it executed
// reports errant and does not replicate).
func (c *Cluster) expectErrantReported(t *testing.T, m *Member, ahead string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var st *Status
	for time.Now().Before(deadline) {
		if st = m.Status(); st != nil && st.Errant != "" {
			if st.Role == "replica" || st.Replication == "running" {
				t.Errorf("%s reports errant %s but replicates: %s", m.Name, st.Errant, st)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	rs, _ := m.ReplicaStatus()
	knownBug(t, "KB-ERRANT-FORK", "%s executed %s, which the primary never received, but its agent does not report it errant "+
		"after 15 s: /status %s; SHOW SLAVE STATUS: %s", m.Name, ahead, st, rs)
}

// launchImpostorServer starts a MariaDB server outside the cluster (db4,
// server id 4), configured read-only like the others.
func (c *Cluster) launchImpostorServer(t *testing.T) *mysqltest.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "mysqltest-")
	if err != nil {
		t.Fatal(err)
	}
	s, err := mysqltest.Launch(dir, len(c.Members)+1, mysqltest.Options{ExtraArgs: []string{"--read-only=ON"}})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("starting the impostor's MariaDB: %v", err)
	}
	t.Cleanup(s.Destroy)
	return s
}

// newImpostor prepares an agent on s that runs with --name=name, with its
// own mysqld, API and log (<server>-as-<name>.log), and stops it (and s)
// when the test ends. The harness calls the member by its server's name.
func (c *Cluster) newImpostor(t *testing.T, s *mysqltest.Server, name string) *Member {
	t.Helper()
	m := c.newMember(len(c.Members), s, name, s.Name+"-as-"+name)
	t.Cleanup(m.cleanup)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("----- impostor %s (--name=%s): last 40 lines of the agent log %s -----\n%s", m.Name, name, m.LogPath, localproc.Tail(m.LogPath, 40))
		}
	})
	return m
}

// watchImpostor starts imp, whose agent runs under the name of a live
// member, and watches the cluster for d: the impostor says it refuses to
// act, its mysqld stays read-only and its GET /primary 503; leader keeps the
// lock under the same agent instance and stays the primary; the member
// record of the name it took is left as the real member wrote it.
func (c *Cluster) watchImpostor(t *testing.T, imp *Member, leader *Member, d time.Duration) {
	t.Helper()
	name := imp.agentName()
	holder, instance := c.leaderRecord(t)
	if holder != leader.Name || instance == "" || instance != leader.Status().Instance {
		t.Fatalf("leader key: holder %q instance %q; want %s and its agent's instance %q", holder, instance, leader.Name, leader.Status().Instance)
	}
	recordBefore := c.memberRecord(t, name)
	started := time.Now()
	imp.StartAgent()
	c.expectRefusing(t, imp, name)
	for time.Since(started) < d {
		if h, i := c.leaderRecord(t); h != holder || i != instance {
			t.Fatalf("%v after the impostor started as %s, the leader key names %q instance %q; want %q instance %q",
				ms(time.Since(started)), name, h, i, holder, instance)
		}
		if !leader.IsPrimaryAPI() {
			t.Errorf("%v after the impostor started as %s, %s's GET /primary does not answer 200: %s",
				ms(time.Since(started)), name, leader.Name, leader.Status())
		}
		if imp.IsPrimaryAPI() {
			t.Errorf("the impostor's GET /primary answers 200: %s", imp.Status())
		}
		if !imp.MustReadOnly(t) {
			t.Errorf("the impostor's mysqld %s is writable", imp.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := c.memberRecord(t, name); got != recordBefore {
		t.Errorf("member record %s was %+v before the impostor started, %+v after: the impostor published it", name, recordBefore, got)
	}
	c.expectRefusing(t, imp, name)
}

// agentName is the --name the member's agent runs with.
func (m *Member) agentName() string {
	for _, a := range m.args {
		if v, ok := strings.CutPrefix(a, "--name="); ok {
			return v
		}
	}
	return m.Name
}

// expectRefusing waits until the impostor running as name says it refuses
// to act: /status duplicate set, its own instance, mysqlha_duplicate_identity 1.
func (c *Cluster) expectRefusing(t *testing.T, imp *Member, name string) {
	t.Helper()
	waitFor(t, 5*time.Second, "the impostor running as "+name+" to report a duplicate identity", func() (bool, string) {
		st := imp.Status()
		if st == nil || st.Duplicate == "" {
			return false, fmt.Sprintf("/status: %+v", st)
		}
		real := c.Member(name).Status()
		if st.Name != name || st.Instance == "" || real == nil || st.Instance == real.Instance {
			return false, fmt.Sprintf("impostor /status name %q instance %q; the real member's: %+v", st.Name, st.Instance, real)
		}
		v, ok := imp.Metric("mysqlha_duplicate_identity")
		return ok && v == 1, fmt.Sprintf("mysqlha_duplicate_identity = %v (present %v); /status duplicate %q", v, ok, st.Duplicate)
	})
}

// expectNeverWritable fails the test if the monitor ever saw m writable.
func (c *Cluster) expectNeverWritable(k *Monitor, m *Member) {
	c.tb.Helper()
	for _, e := range k.Events() {
		if e.Member == m.Name && e.Writable {
			c.tb.Errorf("%s was writable at %s:\n%s", m.Name, stamp(e.At), k.Timeline())
		}
	}
}

// expectSteadyWrites checks that leader, and no other member, acknowledged
// writes all through [from, to], never more than 2 s apart (well below a
// failover's ttl, well above a loaded machine's stalls), and
// returns the longest gap; during says what went on meanwhile.
func expectSteadyWrites(t *testing.T, w *Writer, leader *Member, from, to time.Time, during string) time.Duration {
	t.Helper()
	var gap time.Duration
	last := from
	n := 0
	for _, a := range w.Acks() {
		if a.At.Before(from) || a.At.After(to) {
			continue
		}
		if a.Member != leader.Name {
			t.Errorf("write %d acknowledged by %s at %s, while %s leads", a.ID, a.Member, stamp(a.At), leader.Name)
		}
		gap = max(gap, a.At.Sub(last))
		last = a.At
		n++
	}
	gap = max(gap, to.Sub(last))
	t.Logf("%s acknowledged %d writes in %v; longest gap %v", leader.Name, n, ms(to.Sub(from)), ms(gap))
	if gap > 2*time.Second {
		t.Errorf("%s acknowledged no write for %v %s", leader.Name, ms(gap), during)
	}
	return gap
}

// leaderRecord reads the etcd leader key's holder and agent instance.
func (c *Cluster) leaderRecord(t *testing.T) (holder, instance string) {
	t.Helper()
	ctx, cancel := ctxFor(2 * time.Second)
	defer cancel()
	resp, err := c.etcd.Get(ctx, c.leaderKey())
	if err != nil {
		t.Fatalf("reading the leader key: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return "", ""
	}
	var v struct {
		Holder   string `json:"holder"`
		Instance string `json:"instance"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
		t.Fatalf("leader key %s: %v", resp.Kvs[0].Value, err)
	}
	return v.Holder, v.Instance
}

// memberRecordJSON is the part of an etcd member record the scenario checks.
type memberRecordJSON struct {
	Instance  string `json:"instance"`
	APIURL    string `json:"api_url"`
	MySQLAddr string `json:"mysql_addr"`
}

// memberRecord reads the etcd member record of name.
func (c *Cluster) memberRecord(t *testing.T, name string) memberRecordJSON {
	t.Helper()
	ctx, cancel := ctxFor(2 * time.Second)
	defer cancel()
	key := "/mysqlha/" + c.Name + "/members/" + name
	resp, err := c.etcd.Get(ctx, key)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatalf("no member record %s", key)
	}
	var v memberRecordJSON
	if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}
