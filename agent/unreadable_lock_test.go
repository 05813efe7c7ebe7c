package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// garbledLockStore shows the lock of held as unreadable while garbled is
// set, as a backend shows a Lease whose holderIdentity is garbage: held by
// dcs.UnknownHolder until it expires.
type garbledLockStore struct {
	Store
	held    string
	garbled *atomic.Bool
}

func (s garbledLockStore) Cluster(ctx context.Context) (*dcs.Cluster, error) {
	cl, err := s.Store.Cluster(ctx)
	if err != nil || !s.garbled.Load() || cl.Leader == nil || cl.Leader.Holder != s.held {
		return cl, err
	}
	c, l := *cl, *cl.Leader
	garbage := strings.Repeat("x", 10<<10)
	l.Holder, l.Instance = dcs.UnknownHolder, ""
	l.Err = fmt.Errorf("%w: Lease test/test-leader: invalid leader lock: %w", dcs.ErrCorrupt, dcs.ValidateName("holder", garbage))
	c.Leader = &l
	return &c, nil
}

// The primary dies while its lock reads as garbage (someone wrote
// holderIdentity by hand): the member that takes over records the
// failover in the history from the last leader it could read, says the
// lock was unreadable, and never names "(unknown)" as a leader.
func TestLoopTakeOverFromAnUnreadableLockIsRecorded(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2", "db3")
	h.bootstrap()
	var garbled atomic.Bool
	for _, n := range []string{"db2", "db3"} {
		h.agents[n] = h.newAgent(n, n, n, func(s Store) Store { return garbledLockStore{Store: s, held: "db1", garbled: &garbled} })
	}
	h.round()
	garbled.Store(true)
	h.kill9("db1")
	h.advance(2*time.Second, "db2", "db3") // the unreadable lock is still valid: followed, not raced
	h.stepUntil(3*h.config.TTL, "a take-over", func() bool { return h.holder() == "db2" || h.holder() == "db3" }, "db2", "db3")
	leader := h.holder()
	h.advance(2*time.Second, "db2", "db3")
	h.expectPrimary(leader)

	cl, err := h.agents[leader].store.Cluster(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cl.History, func(e dcs.HistoryEntry) bool { return e.Kind == dcs.HistoryFailover && e.To == leader })
	if i < 0 {
		t.Fatalf("no failover to %s in the history: %+v", leader, cl.History)
	}
	if e := cl.History[i]; e.From != "db1" || !strings.Contains(e.Reason, "unreadable") {
		t.Errorf("history entry %+v: want from db1, the last leader read, with a reason saying the lock was unreadable", e)
	}
	h.labels.mu.Lock()
	defer h.labels.mu.Unlock()
	for _, m := range h.labels.messages {
		if strings.Contains(m, dcs.UnknownHolder) {
			t.Errorf("event names %s as a leader: %s", dcs.UnknownHolder, m)
		}
	}
}

func TestLostLeaderNeverNamesTheUnknownHolder(t *testing.T) {
	h := newLoopHarness(t, "db1", "db2")
	a := h.agents["db2"]
	unreadable := &dcs.Cluster{Leader: &dcs.Leader{Holder: dcs.UnknownHolder, Expired: true, Err: dcs.ErrCorrupt}}
	for _, tc := range []struct {
		name, last string
		cl         *dcs.Cluster
		from, why  string
	}{
		{"expired lock of db1", "db1", &dcs.Cluster{Leader: &dcs.Leader{Holder: "db1", Expired: true}}, "db1", ""},
		{"vanished lock (etcd)", "db1", &dcs.Cluster{}, "db1", ""},
		{"nobody ever seen", "", &dcs.Cluster{}, "", "leader lost"},
		{"unreadable lock, db1 read before", "db1", unreadable, "db1", "unreadable, and the last leader it named was db1"},
		{"unreadable lock, nobody read before", "", unreadable, "", "unreadable, and no earlier leader was seen"},
		{"our own earlier lock", "db2", &dcs.Cluster{}, "", "leader lost"},
	} {
		a.lastLeader = tc.last
		from, why := a.lostLeader(tc.cl)
		if from != tc.from || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s: lostLeader = %q, %q; want %q and a reason containing %q", tc.name, from, why, tc.from, tc.why)
		}
		if err := dcs.ValidateName("history from", from); from != "" && err != nil {
			t.Errorf("%s: the history would reject from %q: %v", tc.name, from, err)
		}
	}
}
