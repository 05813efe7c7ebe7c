package dcstest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs"
)

// Member records: round trip, write rate, staleness, and deletion only once
// the backend judges the member gone.

func fullMember(name string) dcs.Member {
	lag := 1500 * time.Millisecond
	return dcs.Member{
		Name: name, Role: dcs.RoleReplica, APIURL: "http://10.0.0.7:8008", MySQLAddr: "10.0.0.7:3306",
		GTIDExecuted:  "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77",
		GTIDRetrieved: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-80",
		Replication:   dcs.ReplicationBroken, ReplicationError: "Error 1062: duplicate key",
		Lag: &lag, NoFailover: true, FailoverPriority: 3,
		Tags:      map[string]string{"zone": "a", "rack": "r1"},
		UpdatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC),
	}
}

// sameMember compares what UpdateMember wrote with what a reader decoded.
func sameMember(got, want dcs.Member) bool {
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		return false
	}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Version, got.ObservedAt, got.Stale = "", time.Time{}, false
	return reflect.DeepEqual(got, want)
}

func testMemberRoundTrip(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	want := fullMember("m0")
	want.Instance = a.Instance() // explicit; an empty one is filled in
	must(t, "update member", a.UpdateMember(ctxT(t), want))
	for _, s := range e.Stores {
		c := waitFor(t, s, "m0's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m0"); return ok })
		got, _ := c.Member("m0")
		if !sameMember(got, want) {
			t.Fatalf("%s reads m0 as\n%+v\nwant\n%+v", s.Member(), got, want)
		}
		if got.Version == "" || got.ObservedAt.IsZero() || got.Stale {
			t.Fatalf("read-side fields not set: %+v", got)
		}
	}
	// A minimal record: name from the store, UpdatedAt from its clock.
	must(t, "update minimal member", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary}))
	c := waitFor(t, a, "m1's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m1"); return ok })
	m1, _ := c.Member("m1")
	if m1.Role != dcs.RolePrimary || m1.UpdatedAt.IsZero() || m1.Lag != nil || len(m1.Tags) != 0 || m1.Instance != b.Instance() {
		t.Fatalf("minimal record read as %+v, want instance %s filled in", m1, b.Instance())
	}
	if len(c.Members) != 2 || c.Members[0].Name != "m0" || c.Members[1].Name != "m1" {
		t.Fatalf("members not sorted by name: %+v", c.Members)
	}
	mustIs(t, "write another member's record", a.UpdateMember(ctxT(t), dcs.Member{Name: "m1"}), dcs.ErrInvalid)
	bad := fullMember("m0")
	bad.APIURL = "not a url"
	mustIs(t, "write an invalid record", a.UpdateMember(ctxT(t), bad), dcs.ErrInvalid)
}

func testMemberWriteRate(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	m := fullMember("m0")
	m.UpdatedAt = time.Time{}
	version := func() string {
		c := snapshot(t, a)
		got, ok := c.Member("m0")
		if !ok {
			t.Fatal("m0's record missing")
		}
		return got.Version
	}
	must(t, "first write", a.UpdateMember(ctxT(t), m))
	waitFor(t, a, "m0's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m0"); return ok })
	v1 := version()
	// Only volatile fields change: no write before the refresh interval.
	m.GTIDExecuted += ",aaaaaaaa-71ca-11e1-9e33-c80aa9429562:1"
	must(t, "volatile update", a.UpdateMember(ctxT(t), m))
	if v := version(); v != v1 {
		t.Fatalf("a GTID-only change was written at once (version %s -> %s)", v1, v)
	}
	// A role change is written at once.
	m.Role = dcs.RolePrimary
	must(t, "role change", a.UpdateMember(ctxT(t), m))
	c := waitFor(t, b, "m0 is primary", func(c *dcs.Cluster) bool { x, _ := c.Member("m0"); return x.Role == dcs.RolePrimary })
	x, _ := c.Member("m0")
	if x.GTIDExecuted != m.GTIDExecuted {
		t.Fatalf("role change did not carry the pending GTID: %q", x.GTIDExecuted)
	}
	// After the refresh interval a volatile change is written.
	e.Advance(e.MemberRefresh)
	m.GTIDExecuted += "-2"
	must(t, "volatile update after refresh", a.UpdateMember(ctxT(t), m))
	waitFor(t, b, "m0's new GTID", func(c *dcs.Cluster) bool { x, _ := c.Member("m0"); return x.GTIDExecuted == m.GTIDExecuted })
}

func testMemberStale(t *testing.T, e *Env) {
	a, b := e.Stores[0], e.Stores[1]
	must(t, "b writes its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RoleReplica}))
	c := waitFor(t, a, "m1's record", func(c *dcs.Cluster) bool { _, ok := c.Member("m1"); return ok })
	if m, _ := c.Member("m1"); m.Stale {
		t.Fatalf("fresh record reads stale: %+v", m)
	}
	must(t, "b stops", b.Close())
	e.Advance(e.MemberTTL)
	waitFor(t, a, "m1's record gone or stale", func(c *dcs.Cluster) bool {
		m, ok := c.Member("m1")
		return !ok || m.Stale
	})
}

// testDeleteMember: a member's record is deleted only once the member is
// gone by the backend's rule; a live member (fresh record, or the lock
// holder) keeps it.
func testDeleteMember(t *testing.T, e *Env) {
	a, b, c := e.Stores[0], e.Stores[1], e.Stores[2]
	if e.Remover != nil {
		a = e.Remover()
	}
	mustIs(t, "delete without a record", a.DeleteMember(ctxT(t), "m9"), dcs.ErrNotFound)
	mustIs(t, "delete of an invalid name", a.DeleteMember(ctxT(t), "M_1"), dcs.ErrInvalid)
	must(t, "m1 writes its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary}))
	must(t, "m1 takes the lock", b.AcquireLeader(ctxT(t), e.TTL))
	must(t, "m2 writes its record", c.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RoleReplica}))
	waitFor(t, a, "both records and m1's lock", func(cl *dcs.Cluster) bool {
		_, ok1 := cl.Member("m1")
		_, ok2 := cl.Member("m2")
		return ok1 && ok2 && holderIs("m1")(cl)
	})
	mustIs(t, "delete of a fresh record", a.DeleteMember(ctxT(t), "m2"), dcs.ErrLive)
	err := a.DeleteMember(ctxT(t), "m1")
	mustIs(t, "delete of the lock holder", err, dcs.ErrLive)
	if !strings.Contains(err.Error(), "holds the leader lock") {
		t.Fatalf("refusal for the lock holder does not say so: %v", err)
	}

	// m2's agent dies; m1's lives on: it renews, and republishes its record
	// as a running agent does (a non-volatile change writes at once).
	if e.Crash != nil {
		e.Crash(2)
	} else {
		must(t, "m2 stops", c.Close())
	}
	step := min(e.TTL, e.MemberTTL) / 2 // m1 keeps its lock throughout
	for passed := time.Duration(0); passed < e.MemberTTL; passed += step {
		e.Advance(step)
		must(t, "m1 renews", b.RenewLeader(ctxT(t), e.TTL))
	}
	must(t, "m1 rewrites its record", b.UpdateMember(ctxT(t), dcs.Member{Role: dcs.RolePrimary, Tags: map[string]string{"zone": "b"}}))
	waitFor(t, a, "m1's rewritten record", func(cl *dcs.Cluster) bool { m, _ := cl.Member("m1"); return m.Tags["zone"] == "b" })
	mustIs(t, "delete of the live lock holder", a.DeleteMember(ctxT(t), "m1"), dcs.ErrLive)

	// Gone by the backend's rule: the record is deleted now (or, on etcd,
	// vanishes with its session lease).
	deadline := time.Now().Add(opTimeout)
	for {
		err := a.DeleteMember(ctxT(t), "m2")
		if err == nil || errors.Is(err, dcs.ErrNotFound) {
			break
		}
		if !errors.Is(err, dcs.ErrLive) || time.Now().After(deadline) {
			t.Fatalf("delete of a stopped member's record: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range []dcs.Store{a, b} {
		waitFor(t, s, "m2's record gone", func(cl *dcs.Cluster) bool { _, ok := cl.Member("m2"); return !ok })
	}
	mustIs(t, "delete again", a.DeleteMember(ctxT(t), "m2"), dcs.ErrNotFound)
	if _, ok := snapshot(t, a).Member("m1"); !ok {
		t.Fatal("the live member's record went with the stopped one's")
	}
}
