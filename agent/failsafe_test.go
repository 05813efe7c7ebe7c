package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mysqlha/mysqlha/dcs"
)

func failsafeConfig() dcs.Config {
	c := dcs.DefaultConfig()
	c.Failsafe = true
	return c
}

// The DCS stops answering everyone: every member confirms the leader, which
// stays writable for as long as the outage lasts, and nobody else promotes.
func TestLoopFailsafeDCSDown(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	for _, n := range h.names {
		h.srv.Partition(n)
	}
	h.advance(6*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v during the DCS outage, want [db1]", w)
	}
	if !h.agents["db1"].failsafeActive {
		t.Fatal("db1 is not in failsafe mode")
	}
	for _, n := range h.names {
		h.srv.Heal(n)
	}
	h.advance(3*time.Second, h.names...)
	h.expectPrimary("db1")
	if h.agents["db1"].failsafeActive {
		t.Fatal("db1 still in failsafe mode after the DCS came back")
	}
}

// A StatefulSet scaled down from 4 to 3 leaves db4's record behind, stale,
// with no pod. When the DCS then goes down, failsafe must still hold: db4
// has no agent to confirm the leader, or to race. Without telling a
// scaled-away member from a silent one, the leader fenced at its deadline.
func TestLoopFailsafeHoldsWithAScaledAwayMember(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.leaveRecord("db4", h.mysql.byName("db1").pos())
	h.advance(dcs.DefaultMemberTTL+dcs.DefaultMemberRefresh+time.Second, h.names...) // stale, and its pod found gone
	for _, n := range h.names {
		h.srv.Partition(n)
	}
	h.advance(6*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v during the DCS outage, want [db1]: the scaled-away db4 kept failsafe from holding", w)
	}
}

// Without failsafe mode, the same outage demotes the leader at its
// deadline: the rule the mode relaxes.
func TestLoopWithoutFailsafeDCSDownFences(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	for _, n := range h.names {
		h.srv.Partition(n)
	}
	h.advance(2*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("writable %v while the DCS is down and failsafe is off", w)
	}
}

// The primary is cut off from the DCS but not from its peers: its lock
// expires in the DCS, but the others promised not to race, so it stays
// the one primary.
func TestLoopFailsafePrimaryCutFromDCSOnly(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.srv.Partition("db1")
	h.advance(6*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v, want [db1]", w)
	}
	h.srv.Heal("db1")
	h.advance(3*time.Second, h.names...)
	h.expectPrimary(h.holder())
}

// The primary is cut off from everything: nobody confirms it, so it fences
// at its deadline, and a replica takes over once its promise has lapsed.
func TestLoopFailsafePrimaryCutFromEverything(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.srv.Partition("db1")
	h.unreachable["db1"] = true
	h.advance(h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 0 && w[0] == "db1" {
		t.Fatalf("db1 still writable %s after it was cut off", h.config.TTL)
	}
	h.advance(3*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 1 || w[0] == "db1" {
		t.Fatalf("writable %v: want one replica promoted", w)
	}
}

// A member refuses to confirm a leader its own view contradicts, and
// while failsafe mode is off.
func TestFailsafeRefusals(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	db1 := h.agents["db1"].instance
	for _, c := range []struct {
		to  string
		req FailsafeRequest
	}{
		{"db2", FailsafeRequest{Leader: "db3", Instance: "x"}},   // the lock names db1
		{"db2", FailsafeRequest{Leader: "db1", Instance: "old"}}, // another instance of db1
		{"db1", FailsafeRequest{Leader: "db2", Instance: "x"}},   // db1 holds the lock itself
		{"db2", FailsafeRequest{}},                               // malformed
	} {
		if err := h.agents[c.to].acceptFailsafe(c.req); err == nil {
			t.Errorf("%s confirmed %+v", c.to, c.req)
		}
	}
	if err := h.agents["db2"].acceptFailsafe(FailsafeRequest{Leader: "db1", Instance: db1}); err != nil {
		t.Errorf("db2 refused its leader: %v", err)
	}
	off := newLoopHarness(t, "db1", "db2")
	off.round()
	off.round()
	if err := off.agents["db2"].acceptFailsafe(FailsafeRequest{Leader: "db1", Instance: off.agents["db1"].instance}); err == nil {
		t.Error("a member confirmed with failsafe mode off")
	}
}

// A member that joins after the leader lost the DCS is not in the leader's
// member set and is never asked; it sees the lock expired, but its peers'
// promises hold it back.
func TestLoopFailsafeLateMemberDoesNotRace(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3", "db4")
	h.killAgent("db4") // not started yet
	h.bootstrap()
	h.srv.Partition("db1")
	h.advance(h.config.TTL, h.names...)
	delete(h.unreachable, "db4")
	h.names = append(h.names, "db4")
	h.mysql.byName("db4").commit(1000) // the most complete data: it would win a race
	h.advance(4*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v, want [db1]", w)
	}
}

// POST /failsafe over real HTTP: a confirmation, a refusal, bad input.
func TestFailsafeHTTP(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	srv := httptest.NewServer(h.agents["db2"].Handler(prometheus.NewRegistry()))
	defer srv.Close()
	post := HTTPPeerFailsafe(srv.Client())
	if err := post(h.ctx, srv.URL, FailsafeRequest{Leader: "db1", Instance: h.agents["db1"].instance}); err != nil {
		t.Fatalf("confirmation refused: %v", err)
	}
	if h.agents["db2"].promisedLeader() != "db1" {
		t.Fatal("no promise recorded")
	}
	if err := post(h.ctx, srv.URL, FailsafeRequest{Leader: "db3", Instance: "x"}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a request for another leader: %v, want 409", err)
	}
	for _, body := range []string{"", "{", `{"leader": 5}`, strings.Repeat("x", 10000)} {
		resp, err := srv.Client().Post(srv.URL+"/failsafe", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %.20q: %s, want 400", body, resp.Status)
		}
	}
}

// A flaky DCS (Patroni #3462, #3344): renewals fail four loops in five. The
// leader's deadline runs out between two successes, so without failsafe
// mode it is demoted again and again; with it, never.
func TestLoopFailsafeFlakyDCS(t *testing.T) {
	for _, failsafe := range []bool{false, true} {
		cfg := dcs.DefaultConfig()
		cfg.Failsafe = failsafe
		h := newLoopHarnessWith(t, cfg, "db1", "db2", "db3")
		h.bootstrap()
		demoted := false
		for i := range 50 {
			if i%5 == 0 {
				h.srv.Heal("db1")
			} else {
				h.srv.Partition("db1")
			}
			h.advance(time.Second, h.names...)
			if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
				demoted = true
			}
		}
		if demoted != !failsafe {
			t.Errorf("failsafe %v: demoted %v", failsafe, demoted)
		}
	}
}

// A promise outlasts the deadline its leader extends by the leader's own
// ttl, even when set-config lowered ttl on the confirming member but not
// yet on the leader cut off from the DCS.
func TestFailsafePromiseCoversTheLeadersTTL(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	h.bootstrap()
	h.round()
	db2 := h.agents["db2"]
	own := failsafeConfig().TTL
	leaders := 4 * own // the leader still runs with the ttl before a run-time change
	req := FailsafeRequest{Leader: "db1", Instance: h.agents["db1"].instance, HoldMillis: leaders.Milliseconds()}
	if err := db2.acceptFailsafe(req); err != nil {
		t.Fatal(err)
	}
	if got := db2.promise.until.Sub(h.clock.Now()); got != leaders {
		t.Fatalf("promised for %v, want the leader's ttl %v (own ttl %v)", got, leaders, own)
	}
	req.HoldMillis = 0 // an older leader: the member's own ttl
	if err := db2.acceptFailsafe(req); err != nil {
		t.Fatal(err)
	}
	if got := db2.promise.until.Sub(h.clock.Now()); got != own {
		t.Fatalf("promised for %v, want own ttl %v", got, own)
	}
	for _, hold := range []int64{-1, (dcs.MaxTTL + time.Second).Milliseconds()} {
		req.HoldMillis = hold
		if err := db2.acceptFailsafe(req); err == nil {
			t.Errorf("hold_ms %d accepted", hold)
		}
	}
}

// countingStore counts the member record writes.
type countingStore struct {
	Store
	updates *atomic.Int64
}

func (s countingStore) UpdateMember(ctx context.Context, m dcs.Member) error {
	s.updates.Add(1)
	return s.Store.UpdateMember(ctx, m)
}

// While failsafe holds, the leader makes no call the unreachable DCS could
// only let time out: no member record write, no question about a
// scaled-away pod. Each such call waits out retry_timeout when the DCS
// accepts connections and never answers (an API server stopping), while a
// failsafe round holds the deadline only ttl - safety_margin -
// retry_timeout ahead (3 s by default): on the test node the calls made
// the rounds fall behind, and the leader fenced for 24 s in 2 trials of 4.
func TestLoopFailsafeLeaderMakesNoFutileDCSCall(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	var updates atomic.Int64
	h.agents["db1"] = h.newAgent("db1", "db1", "db1", func(s Store) Store { return countingStore{s, &updates} })
	h.bootstrap()
	h.leaveRecord("db4", h.mysql.byName("db1").pos())
	h.labels.mu.Lock()
	h.labels.gone["db4"] = true
	h.labels.mu.Unlock()
	h.advance(dcs.DefaultMemberTTL+dcs.DefaultMemberRefresh+time.Second, h.names...) // db4 stale, its pod found gone
	for _, n := range h.names {
		h.srv.Partition(n)
	}
	h.advance(h.config.TTL, h.names...)
	if !h.agents["db1"].failsafeActive {
		t.Fatal("db1 is not in failsafe mode while the DCS is unreachable")
	}
	updates.Store(0)
	h.labels.mu.Lock()
	h.labels.goneAsked = 0
	h.labels.mu.Unlock()
	for range 3 * int(dcs.DefaultMemberRefresh/time.Second) {
		h.clock.Step(time.Second)
		h.step("db1")
	}
	if n := updates.Load(); n != 0 {
		t.Errorf("the failsafe leader tried to write its member record %d times", n)
	}
	h.labels.mu.Lock()
	asked := h.labels.goneAsked
	h.labels.mu.Unlock()
	if asked != 0 {
		t.Errorf("the failsafe leader asked the API server about pods %d times", asked)
	}
	if w := h.mysql.writable(); len(w) != 1 || w[0] != "db1" {
		t.Fatalf("writable %v, want [db1] held by failsafe", w)
	}
}

// forbiddenStore answers every call with the API server's 403 once
// revoked: a revoked RoleBinding, or a credential that expired.
type forbiddenStore struct {
	Store
	revoked *bool
}

func (s forbiddenStore) refused(op string) error {
	return fmt.Errorf("%s: %w: leases.coordination.k8s.io is forbidden: User cannot update resource", op, dcs.ErrForbidden)
}

func (s forbiddenStore) Cluster(ctx context.Context) (*dcs.Cluster, error) {
	if *s.revoked {
		return nil, s.refused("reading the cluster")
	}
	return s.Store.Cluster(ctx)
}

func (s forbiddenStore) RenewLeader(ctx context.Context, ttl time.Duration) error {
	if *s.revoked {
		return s.refused("renewing the lock")
	}
	return s.Store.RenewLeader(ctx, ttl)
}

// A DCS that refuses the leader (403, 401) answers: it is not unreachable,
// and failsafe mode, which keeps a leader writable through an outage, does
// not apply. The leader fences at once and says why; with failsafe as the
// only guard it stayed writable for as long as its RoleBinding was gone.
func TestLoopFailsafeDoesNotCoverAForbiddenDCS(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	h := newLoopHarnessLogged(t, failsafeConfig(), zap.New(core), "db1", "db2", "db3")
	revoked := false
	h.agents["db1"] = h.newAgent("db1", "db1", "db1", func(s Store) Store { return forbiddenStore{s, &revoked} })
	h.bootstrap()
	revoked = true
	h.step("db1")
	if w := h.mysql.writable(); len(w) != 0 {
		t.Fatalf("writable %v after the DCS refused the leader's renewal; want it fenced at once", w)
	}
	if h.agents["db1"].failsafeActive {
		t.Fatal("db1 entered failsafe mode on a refusal")
	}
	if logs.FilterMessageSnippet("refused").FilterMessageSnippet("failsafe mode does not apply").Len() == 0 {
		t.Fatalf("no log line says why: %v", logs.All())
	}
	h.advance(2*h.config.TTL, h.names...)
	if w := h.mysql.writable(); len(w) != 1 || w[0] == "db1" {
		t.Fatalf("writable %v once db1's lock lapsed, want one other member", w)
	}
}

// A leader already in failsafe mode (the DCS unreachable) whose DCS comes
// back refusing it leaves failsafe mode and fences.
func TestLoopFailsafeEndsWhenTheDCSRefuses(t *testing.T) {
	h := newLoopHarnessWith(t, failsafeConfig(), "db1", "db2", "db3")
	revoked := false
	h.agents["db1"] = h.newAgent("db1", "db1", "db1", func(s Store) Store { return forbiddenStore{s, &revoked} })
	h.bootstrap()
	for _, n := range h.names {
		h.srv.Partition(n)
	}
	h.advance(2*h.config.TTL, h.names...)
	if !h.agents["db1"].failsafeActive {
		t.Fatal("db1 is not in failsafe mode while the DCS is unreachable")
	}
	revoked = true
	for _, n := range h.names {
		h.srv.Heal(n)
	}
	h.step("db1")
	if w := h.mysql.writable(); len(w) != 0 || h.agents["db1"].failsafeActive {
		t.Fatalf("writable %v, failsafe %v after the DCS refused the leader; want fenced, failsafe off", w, h.agents["db1"].failsafeActive)
	}
}
