package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/failover"
)

// loopHarness runs several agents' iterations by hand against the in-memory
// DCS, a fake clock and simulated mysqld servers, checking after every
// single iteration that no two servers are writable.
type loopHarness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	srv    *memory.Server
	mysql  *fakeMySQL
	labels *fakeLabels
	agents map[string]*Agent
	names  []string
	// unreachable marks agents whose API does not answer (frozen or dead).
	unreachable map[string]bool
	ctx         context.Context
	// config is the cluster config the first agent bootstraps with.
	config dcs.Config
	// canKill gives the agents built from now on a KillMySQL.
	canKill bool
	// noFailover: the agents of these members, built from now on, run
	// with --nofailover.
	noFailover map[string]bool
	// check, when set, replaces the split-brain check run after every
	// iteration (name's).
	check func(name string)
	// log, when set, is the agents' logger instead of the test's.
	log *zap.Logger
}

type fakeLabels struct {
	mu    sync.Mutex
	roles map[string]dcs.Role
	// told is every role each agent announced (Deps.RoleChanged).
	told   map[string][]string
	events []string
	// messages are the events' texts, as "pod:reason: message".
	messages []string
	// gone are the pods that no longer exist; down maps a pod to its UID
	// while every container of it is stopped.
	gone map[string]bool
	down map[string]string
	// goneAsked counts the PodGone calls.
	goneAsked int
	// onLabel, when set, sees every SetRole and RemovePrimary call, as
	// "set POD ROLE" and "remove POD", as it is made.
	onLabel func(call string)
}

func (f *fakeLabels) SetRole(_ context.Context, pod string, r dcs.Role) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onLabel != nil {
		f.onLabel("set " + pod + " " + r.String())
	}
	f.roles[pod] = r
	return nil
}

func (f *fakeLabels) tell(member, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.told[member] = append(f.told[member], role)
}

func (f *fakeLabels) roleChanges(member string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.told[member], ",")
}

func (f *fakeLabels) RemovePrimary(_ context.Context, pod string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onLabel != nil {
		f.onLabel("remove " + pod)
	}
	if f.roles[pod] == dcs.RolePrimary {
		f.roles[pod] = dcs.RoleUnknown
	}
	return nil
}

func (f *fakeLabels) Event(_ context.Context, pod, _, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, pod+":"+reason)
	f.messages = append(f.messages, pod+":"+reason+": "+message)
}

// PodDown: the pods a test marked down (every container stopped), by
// name and UID.
func (f *fakeLabels) PodDown(_ context.Context, pod, uid string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if uid != "" && f.down[pod] == uid {
		return "mariadb: terminated (Error, exit 137); agent: terminated (Error, exit 137)", nil
	}
	return "", nil
}

// PodGone: the pods a test removed (a member scaled away) are gone.
func (f *fakeLabels) PodGone(_ context.Context, pod string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.goneAsked++
	return f.gone[pod], nil
}

func (f *fakeLabels) role(pod string) dcs.Role {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.roles[pod]
}

func newLoopHarness(t *testing.T, names ...string) *loopHarness {
	return newLoopHarnessWith(t, dcs.DefaultConfig(), names...)
}

// newLoopHarnessWith starts the agents with config as their bootstrap
// cluster config.
func newLoopHarnessWith(t *testing.T, config dcs.Config, names ...string) *loopHarness {
	return newLoopHarnessLogged(t, config, nil, names...)
}

// newLoopHarnessLogged is newLoopHarnessWith whose agents log to log; nil
// is the test's log.
func newLoopHarnessLogged(t *testing.T, config dcs.Config, log *zap.Logger, names ...string) *loopHarness {
	h := &loopHarness{log: log,
		t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)),
		srv: memory.NewServer("test"), mysql: newFakeMySQL(names...),
		labels: &fakeLabels{roles: map[string]dcs.Role{}, told: map[string][]string{}, gone: map[string]bool{}, down: map[string]string{}}, agents: map[string]*Agent{}, names: names, unreachable: map[string]bool{},
		ctx: context.Background(), config: config, noFailover: map[string]bool{},
	}
	for _, n := range names {
		h.startAgent(n)
	}
	return h
}

// startAgent builds (or rebuilds, as after a crash) the agent of name and
// runs its start-up fence.
func (h *loopHarness) startAgent(name string) {
	h.t.Helper()
	h.agents[name] = h.newAgent(name, name, name, nil)
}

// newAgent builds an agent named name on the fake mysqld of dbName, whose
// API answers as apiName, with its store optionally wrapped (to inject DCS
// faults), and runs its start-up fence.
func (h *loopHarness) newAgent(name, dbName, apiName string, wrap func(Store) Store) *Agent {
	h.t.Helper()
	mem, err := h.srv.NewStore(memory.Options{Member: name, Clock: h.clock})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { mem.Close() })
	var store Store = mem
	if wrap != nil {
		store = wrap(mem)
	}
	db := h.mysql.byName(dbName)
	log := h.log
	if log == nil {
		log = zaptest.NewLogger(h.t)
	}
	a, err := New(Config{
		Cluster: "test", Name: name, MySQLAddr: db.addr, APIURL: "http://" + apiName + ":8008",
		ReplicationUser: "repl", Bootstrap: h.config, NoFailover: h.noFailover[name], PodUID: "uid-" + name,
	}, Deps{Store: store, LocalAddr: db.addr, Dial: h.mysql.dialFrom(dbName), Labeler: h.labels, Clock: h.clock,
		Metrics: NewMetrics(prometheus.NewRegistry(), "test", name), Logger: log.Named(apiName),
		PeerStatus: h.peerStatus, KillMySQL: h.killer(), PeerFailsafe: h.peerFailsafe(apiName),
		RoleChanged: func(role string) { h.labels.tell(name, role) }})
	if err != nil {
		h.t.Fatal(err)
	}
	a.ensureLocal(h.ctx)
	if a.db != nil {
		a.db.Fence(h.ctx)
	}
	return a
}

func (h *loopHarness) killer() func(context.Context, string) (int, error) {
	if !h.canKill {
		return nil
	}
	return h.mysql.kill
}

// peerFailsafe delivers from's POST /failsafe straight to the agent,
// unless either side's API is unreachable.
func (h *loopHarness) peerFailsafe(from string) PeerFailsafe {
	return func(_ context.Context, apiURL string, req FailsafeRequest) error {
		name := strings.TrimSuffix(strings.TrimPrefix(apiURL, "http://"), ":8008")
		a, ok := h.agents[name]
		if !ok || h.unreachable[name] || h.unreachable[from] {
			return fmt.Errorf("%s unreachable from %s", apiURL, from)
		}
		return a.acceptFailsafe(req)
	}
}

// peerStatus serves each agent's /status straight from the agent, unless
// its mysqld's host is "down" in the simulation (then the pod is gone).
func (h *loopHarness) peerStatus(_ context.Context, apiURL string) (*MemberStatus, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(apiURL, "http://"), ":8008")
	a, ok := h.agents[name]
	if !ok || h.unreachable[name] {
		return nil, fmt.Errorf("%s unreachable", apiURL)
	}
	st := a.Status()
	return &st, nil
}

// step runs one iteration of each named agent, checking the split-brain
// invariant after each.
func (h *loopHarness) step(names ...string) {
	h.t.Helper()
	for _, n := range names {
		// As Run does: iterate again at once while the action asks for it.
		for redo, i := true, 0; redo && i < maxRedo; i++ {
			redo = h.agents[n].iterate(h.ctx, false)
			h.pushDeadman(n)
			if h.check != nil {
				h.check(n)
			} else if w := h.mysql.writable(); len(w) > 1 {
				h.t.Fatalf("split brain after %s's iteration: %v are writable", n, w)
			}
		}
	}
}

// pushDeadman does what name's deadmanPusher goroutine would after the
// iteration: push the dead-man event back when the deadline moved. Only
// when the fake fires dead-man events; the other tests run no pusher.
func (h *loopHarness) pushDeadman(name string) {
	a := h.agents[name]
	if h.mysql.clock == nil || a.db == nil {
		return
	}
	select {
	case <-a.pushDeadman:
		if a.deadmanArmed.Load() && a.hasDeadline() {
			a.armDeadman(h.ctx, a.db)
		}
	default:
	}
}

func (h *loopHarness) round() { h.t.Helper(); h.step(h.names...) }

// advance moves the clock in loop_wait steps, running a round of the given
// agents after each.
func (h *loopHarness) advance(d time.Duration, names ...string) {
	h.t.Helper()
	for elapsed := time.Duration(0); elapsed < d; elapsed += time.Second {
		h.clock.Step(time.Second)
		h.step(names...)
	}
}

func (h *loopHarness) holder() string { return h.srv.Holder() }

func (h *loopHarness) expectPrimary(name string) {
	h.t.Helper()
	if w := h.mysql.writable(); len(w) != 1 || w[0] != name {
		h.t.Fatalf("writable servers %v, want exactly [%s]", w, name)
	}
	if got := h.holder(); got != name {
		h.t.Fatalf("lock holder %q, want %q", got, name)
	}
	if got := h.labels.role(name); got != dcs.RolePrimary {
		h.t.Fatalf("%s labelled %q, want primary", name, got)
	}
}

func (h *loopHarness) expectReplicaOf(name, leader string) {
	h.t.Helper()
	d, l := h.mysql.byName(name), h.mysql.byName(leader)
	if d.source != l.addr || !d.ioRunning || !d.readOnly {
		h.t.Fatalf("%s: source %q io %v read-only %v; want a read-only replica of %s (%s)", name, d.source, d.ioRunning, d.readOnly, leader, l.addr)
	}
	if got := h.labels.role(name); got != dcs.RoleReplica {
		h.t.Fatalf("%s labelled %q, want replica", name, got)
	}
}

func (h *loopHarness) bootstrap() {
	h.t.Helper()
	h.round()
	h.round()
	h.expectPrimary("db1")
	h.expectReplicaOf("db2", "db1")
	h.expectReplicaOf("db3", "db1")
}

func TestLoopBootstrapElectsOnePrimary(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	cl, err := h.agents["db2"].store.Cluster(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Initialized == nil || cl.Initialized.Bootstrapper != "db1" {
		t.Fatalf("initialized record %+v", cl.Initialized)
	}
	// Writes replicate, and repeated rounds change nothing (idempotent).
	if !h.mysql.write("db1") || h.mysql.write("db2") {
		t.Fatal("only the primary may accept writes")
	}
	h.round()
	h.round()
	h.expectPrimary("db1")
	h.expectReplicaOf("db2", "db1")
	if h.mysql.byName("db3").seq() != 1 {
		t.Fatal("the write did not replicate")
	}
}

func TestLoopLeaderPartitionedFromDCS(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	h.srv.Partition("db1")
	// db1 cannot renew: it must fence itself before anyone else may win.
	var fencedAt, takenAt time.Duration
	for elapsed := time.Second; elapsed <= 10*time.Second; elapsed += time.Second {
		h.clock.Step(time.Second)
		h.step("db1")
		if fencedAt == 0 && h.mysql.byName("db1").readOnly {
			fencedAt = elapsed
		}
		h.step("db2", "db3")
		if takenAt == 0 && h.holder() != "db1" && h.holder() != "" {
			takenAt = elapsed
		}
	}
	if fencedAt == 0 || takenAt == 0 || fencedAt >= takenAt {
		t.Fatalf("old leader fenced at %v, lock taken at %v: the fence must come first", fencedAt, takenAt)
	}
	newLeader := h.holder()
	h.expectPrimary(newLeader)
	h.srv.Heal("db1")
	h.round()
	h.round()
	h.expectReplicaOf("db1", newLeader)
}

func TestLoopMysqldDeathReleasesLockAtOnce(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db1").up = false
	start := h.clock.Now()
	h.round()
	h.round()
	if h.clock.Now() != start {
		t.Fatal("test bug: the clock moved")
	}
	h.expectPrimary("db2") // equal histories: the lower name wins at once
	h.expectReplicaOf("db3", "db2")
	if h.labels.role("db1") == dcs.RolePrimary {
		t.Fatal("dead primary kept its primary label")
	}
	cl, _ := h.agents["db3"].store.Cluster(h.ctx)
	if n := len(cl.History); n == 0 || cl.History[n-1].Kind != dcs.HistoryFailover || cl.History[n-1].From != "db1" || cl.History[n-1].To != "db2" {
		t.Fatalf("history %+v, want a failover from db1 to db2", cl.History)
	}
}

func TestLoopFrozenLeaderIsFencedBeforeTakeover(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	// db1's agent stops running; its mysqld stays writable until the new
	// leader fences it remotely, which the invariant check watches.
	h.unreachable["db1"] = true
	h.advance(8*time.Second, "db2", "db3")
	h.expectPrimary("db2")
	if !h.mysql.byName("db1").readOnly {
		t.Fatal("old source not fenced")
	}
	// Thawed: its first act is to fence (deadline passed), then it follows.
	h.unreachable["db1"] = false
	h.step("db1")
	if h.agents["db1"].hasDeadline() {
		t.Fatal("thawed agent still believes it may write")
	}
	h.round()
	h.expectReplicaOf("db1", "db2")
}

func TestLoopPausedClusterDoesNotFailOver(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.setPaused(true)
	h.mysql.byName("db1").up = false
	h.advance(20*time.Second, "db1", "db2", "db3")
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("paused cluster failed over to %v", w)
	}
	h.setPaused(false)
	h.advance(8*time.Second, "db1", "db2", "db3")
	h.expectPrimary("db2")
}

func TestLoopSwitchover(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	if err := h.agents["db2"].store.(*memory.Store).RequestSwitchover(h.ctx, dcs.Switchover{To: "db3"}); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	h.round()
	h.expectPrimary("db3")
	h.expectReplicaOf("db1", "db3")
	h.expectReplicaOf("db2", "db3")
	if h.mysql.byName("db3").seq() != 1 {
		t.Fatal("the new primary lacks the old primary's write")
	}
	// The role change hook hears each change once, in order (the old
	// primary is fenced, role none, before it follows).
	for name, want := range map[string]string{"db1": "primary,none,replica", "db2": "replica", "db3": "replica,primary"} {
		if got := h.labels.roleChanges(name); got != want {
			t.Errorf("%s announced roles %q, want %q", name, got, want)
		}
	}
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	if cl.Switchover != nil || len(cl.History) == 0 || cl.History[len(cl.History)-1].Kind != dcs.HistorySwitchover {
		t.Fatalf("switchover request %+v history %+v", cl.Switchover, cl.History)
	}
}

// The new primary unfences before it asks the API server to drop the old
// primary's label (a round trip its writes need not wait for), and drops it
// before it labels itself, so that a Service selecting the label never
// holds two.
func TestLoopPromotionUnfencesBeforeTouchingLabels(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	var calls []string
	h.labels.onLabel = func(call string) {
		if call == "remove db1" || call == "set db3 primary" {
			calls = append(calls, fmt.Sprintf("%s (db3 writable %v)", call, !h.mysql.byName("db3").readOnly))
		}
	}
	if err := h.agents["db2"].store.(*memory.Store).RequestSwitchover(h.ctx, dcs.Switchover{To: "db3"}); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	h.expectPrimary("db3")
	want := []string{"remove db1 (db3 writable true)", "set db3 primary (db3 writable true)"}
	if !slices.Equal(calls, want) {
		t.Fatalf("label calls %q, want %q", calls, want)
	}
}

func TestLoopSwitchoverAbandonedWhenTargetLags(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db3").ioRunning = false // db3 stops receiving
	h.mysql.write("db1")
	if err := h.agents["db2"].store.(*memory.Store).RequestSwitchover(h.ctx, dcs.Switchover{From: "db1", To: "db3"}); err != nil {
		t.Fatal(err)
	}
	h.step("db1")
	h.expectPrimary("db1") // fenced for the attempt, writable again after giving up
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	if cl.Switchover != nil {
		t.Fatal("abandoned switchover request not cleared")
	}
	if !slices.ContainsFunc(h.labels.events, func(e string) bool { return e == "db1:SwitchoverRejected" }) {
		t.Fatalf("no rejection event: %v", h.labels.events)
	}
}

func TestLoopRejectsSwitchoverToUnknownMember(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	if err := h.agents["db2"].store.(*memory.Store).RequestSwitchover(h.ctx, dcs.Switchover{To: "db9"}); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	h.expectPrimary("db1")
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	if cl.Switchover != nil {
		t.Fatal("rejected request not cleared")
	}
	if !slices.ContainsFunc(h.labels.events, func(e string) bool { return strings.HasSuffix(e, "SwitchoverRejected") }) {
		t.Fatalf("no rejection event: %v", h.labels.events)
	}
}

func TestLoopErrantReplicaNeverTakesOver(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	// db2 diverges: replication reset and a local transaction of its own.
	d := h.mysql.byName("db2")
	d.source, d.ioRunning = "", false
	d.commit(5)
	h.round()
	h.round()
	if h.agents["db2"].errant == "" || d.source != "" {
		t.Fatalf("errant replica: errant %q source %q", h.agents["db2"].errant, d.source)
	}
	// db2 has the longest history but must not be chosen.
	h.mysql.byName("db1").up = false
	h.round()
	h.round()
	h.expectPrimary("db3")
}

// TestLoopMisconfiguredReplicaNeverTakesOver: a member whose mysqld runs
// without the binary log could not serve its replicas after a promotion;
// it is tagged, and another member takes over.
func TestLoopMisconfiguredReplicaNeverTakesOver(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.mysql.byName("db2").noBinlog = true
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	cl, _ := h.agents["db1"].store.Cluster(h.ctx)
	if m, _ := cl.Member("db2"); !strings.Contains(m.Tags[failover.TagMisconfigured], "log_bin") {
		t.Fatalf("db2's record does not say what is misconfigured: tags %v", m.Tags)
	}
	// db2 would win by name among equal histories; it must not be chosen.
	h.mysql.byName("db1").up = false
	h.round()
	h.round()
	h.expectPrimary("db3")
}

func TestLoopRestartedLeaderStartsReadOnly(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.startAgent("db1") // crash and restart of db1's agent only
	if !h.mysql.byName("db1").readOnly {
		t.Fatal("restarted agent did not fence at start")
	}
	// The lock names db1's previous agent instance: nobody may write until
	// it expires, then the usual race elects a primary.
	h.step("db1")
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("writable before the previous instance's lock expired: %v", w)
	}
	h.advance(7*time.Second, "db1", "db2", "db3")
	h.expectPrimary("db1") // equal histories: the lower name wins
}

func TestLoopShutdownHandsOver(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.agents["db1"].iterate(h.ctx, true)
	if h.holder() != "db2" {
		t.Fatalf("holder after shutdown %q, want db2", h.holder())
	}
	h.step("db2", "db3")
	h.expectPrimary("db2")
}

func TestWatchdogFencesWhenTheLoopIsStuck(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	a := h.agents["db1"]
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	go a.watchdog(ctx)
	a.setDeadline(h.clock.Now().Add(4 * time.Second))
	// The fence trigger is one retry_timeout before the deadline.
	waitUntil(t, func() bool { return h.clock.HasWaiters() })
	h.clock.Step(2 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if h.mysql.byName("db1").isReadOnly() {
		t.Fatal("fenced too early")
	}
	h.clock.Step(time.Second)
	waitUntil(t, func() bool { return h.mysql.byName("db1").isReadOnly() })
	if a.hasDeadline() {
		t.Fatal("deadline not cleared after the watchdog fence")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A replica that is ahead of a lock holder still promoting is not errant:
// the holder's history is not final (it may yet stand down for a better
// member). Found on the test node: db3 received the dead primary's last
// write, db2 did not and won the lock on a stale record, db3 judged itself
// errant against read-only db2 and so became ineligible, and db2, once it
// had stood down, promoted without the write.
func TestLoopReplicaAheadOfPromotingHolderIsNotErrant(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.byName("db2").ioRunning = false // db2 misses the last write
	if !h.mysql.write("db1") {
		t.Fatal("write on db1 failed")
	}
	d3 := h.mysql.byName("db3")
	h.mysql.mu.Lock()
	d3.syncLocked() // db3's receiver got it; its agent has not published it yet
	h.mysql.mu.Unlock()
	h.mysql.byName("db1").up = false
	h.clock.Step(dcs.DefaultConfig().TTL) // the lock expires
	if redo := h.agents["db2"].iterate(h.ctx, false); !redo || h.holder() != "db2" {
		t.Fatalf("db2 did not take the lock on its stale view (holder %q)", h.holder())
	}
	h.step("db3") // db3 sees db2 hold the lock, read-only
	if e := h.agents["db3"].errant; e != "" {
		t.Fatalf("db3 judged errant (%s) against a holder that has not promoted", e)
	}
	for i := 0; i < 10 && len(h.mysql.writable()) == 0; i++ {
		h.clock.Step(time.Second)
		h.step("db2", "db3")
	}
	h.expectPrimary("db3")
	if d3.seq() != h.mysql.byName("db1").seq() {
		t.Fatal("the new primary lacks the dead primary's last write")
	}
}

// A replica's lag crossing maximum_lag_on_failover changes whether it may be
// promoted, so its record must say so at once, not after the member refresh
// interval: a replica that has just caught up was otherwise refused as a
// switchover target for up to that long.
func TestLoopLagCrossingTheLimitIsPublishedAtOnce(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	maxLag := dcs.DefaultConfig().MaximumLagOnFailover
	lagOf := func(name string) string {
		t.Helper()
		cl, err := h.agents["db1"].store.Cluster(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cl.Members {
			if m.Name == name {
				return failover.Ineligibility(toCandidate(m, nil, false), failover.Rules{MaxLag: maxLag})
			}
		}
		t.Fatalf("no record of %s", name)
		return ""
	}
	h.mysql.byName("db3").behind = int64((maxLag + 4*time.Minute) / time.Second)
	h.round()
	if why := lagOf("db3"); !strings.Contains(why, "lag") {
		t.Fatalf("db3 replays 4 minutes behind the limit, yet its record makes it eligible (%q)", why)
	}
	h.mysql.byName("db3").behind = 0
	h.round()
	if why := lagOf("db3"); why != "" {
		t.Fatalf("db3 has caught up, yet its record keeps it ineligible: %s", why)
	}
}

// setPaused stores the cluster config paused or resumed, as agentctl pause
// and resume do, through db1's store, then runs one round so that every
// agent reads it.
func (h *loopHarness) setPaused(paused bool) {
	h.t.Helper()
	a := h.agents["db1"]
	cfg := dcs.DefaultConfig()
	cfg.Paused = paused
	cl, _ := a.store.Cluster(h.ctx)
	if err := a.store.SetConfig(h.ctx, cfg, cl.ConfigVersion); err != nil {
		h.t.Fatal(err)
	}
	h.round()
}

// setFenced stores the cluster config with fenced, as agentctl fence does,
// through db2's store (the leader may be the one fenced).
func (h *loopHarness) setFenced(fenced string) {
	h.t.Helper()
	h.setConfig(func(c *dcs.Config) { c.Fenced = fenced })
}

// setConfig changes the stored cluster config as agentctl set-config does,
// through db2's store.
func (h *loopHarness) setConfig(change func(*dcs.Config)) {
	h.t.Helper()
	a := h.agents["db2"]
	cl, _ := a.store.Cluster(h.ctx)
	cfg := cl.Config
	change(&cfg)
	if err := a.store.SetConfig(h.ctx, cfg, cl.ConfigVersion); err != nil {
		h.t.Fatal(err)
	}
}

// agentctl fence on the leader: it gives the lock up read-only, another
// member takes over with its writes, and the fenced member follows and
// never leads, even when the new leader dies; unfenced, it may lead again.
func TestLoopFencedLeaderHandsOverAndNeverLeads(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	h.mysql.write("db1")
	h.round()
	h.setFenced("db1")
	h.round()
	h.advance(h.config.TTL, h.names...) // db1 stands down; the others race
	h.round()
	h.round()
	if got := h.holder(); got != "db2" && got != "db3" {
		t.Fatalf("lock holder %q after fencing the leader db1, want db2 or db3", got)
	}
	leader := h.holder()
	h.expectPrimary(leader)
	h.expectReplicaOf("db1", leader)
	if h.mysql.byName(leader).seq() != 1 {
		t.Fatal("the new leader lacks the fenced leader's write")
	}
	// The new leader dies; the fenced db1 holds as much as the other and
	// still never races.
	other := map[string]string{"db2": "db3", "db3": "db2"}[leader]
	h.mysql.byName(leader).up = false
	for range 4 {
		h.round()
	}
	h.advance(h.config.TTL, h.names...)
	h.round()
	h.round()
	h.expectPrimary(other)
	h.setFenced("")
	h.round()
	h.round()
	h.expectReplicaOf("db1", other)
}
