package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/failover"
)

// fixture is a cluster in the in-memory DCS: db1 leads, db2 and db3 replicate.
type fixture struct {
	srv    *memory.Server
	stores map[string]*memory.Store
	cli    *CLI
	out    *bytes.Buffer
	// clock is agentctl's store's: it judges expiry and staleness.
	clock *clocktesting.FakeClock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{srv: memory.NewServer("demo"), stores: map[string]*memory.Store{}, out: &bytes.Buffer{},
		clock: clocktesting.NewFakeClock(time.Now())}
	for _, n := range []string{"db1", "db2", "db3", "agentctl"} {
		o := memory.Options{Member: n}
		if n == "agentctl" {
			o.Clock = f.clock
		}
		s, err := f.srv.NewStore(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f.stores[n] = s
	}
	if err := f.stores["db1"].AcquireLeader(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	zero := time.Duration(0)
	for n, role := range map[string]dcs.Role{"db1": dcs.RolePrimary, "db2": dcs.RoleReplica, "db3": dcs.RoleReplica} {
		m := dcs.Member{Name: n, Role: role, MySQLAddr: n + ":3306", APIURL: "http://" + n + ":8008",
			GTIDExecuted: "0-1-100", Replication: dcs.ReplicationRunning, Lag: &zero}
		if n == "db1" {
			m.Replication, m.Lag = dcs.ReplicationNone, nil
		}
		if n == "db3" {
			m.GTIDExecuted = "0-1-97"
		}
		if err := f.stores[n].UpdateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	f.cli = &CLI{Store: f.stores["agentctl"], Out: f.out, In: strings.NewReader(""), Poll: 10 * time.Millisecond}
	return f
}

func exitCode(t *testing.T, err error, want int) {
	t.Helper()
	if got := ExitCode(err); got != want {
		t.Fatalf("exit code %d (%v), want %d", got, err, want)
	}
}

func TestStatusTableAndFormats(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
	out := f.out.String()
	for _, want := range []string{"Leader: db1", "Paused: no", "Pending switchover: none", "MEMBER", "db1     primary  running    -       0        0-1-100",
		"db3     replica  streaming  0       3        0-1-97"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, format := range []Format{JSON, YAML} {
		f.out.Reset()
		if err := f.cli.Status(ctx, format, false); err != nil {
			t.Fatal(err)
		}
		var v StatusView
		b := f.out.Bytes()
		if format == YAML {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Leader != "db1" || len(v.Members) != 3 || *v.Members[2].LagTransactions != 3 {
			t.Fatalf("%s output %s: %+v %v", format, f.out, v, err)
		}
	}
	if _, err := ParseFormat("xml"); ExitCode(err) != ExitUsage {
		t.Fatalf("bad -o: %v", err)
	}
}

// A stalled lossless primary, a replica that does not acknowledge and one
// out of the read Service show in the table's TAGS column.
func TestStatusShowsTags(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tag := func(name, key, value string) {
		cl, err := f.stores[name].Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := cl.Member(name)
		m.Tags = map[string]string{key: value}
		if err := f.stores[name].UpdateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	tag("db1", failover.TagStalled, "no replica acknowledges")
	tag("db3", failover.TagAsync, "streams without acknowledging")
	tag("db2", failover.TagNoReads, "lag 45s over maximum_lag_for_reads 30s")
	if err := f.cli.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stalled: no replica acknowledges", "async", "noreads: lag 45s over maximum_lag_for_reads 30s"} {
		if !strings.Contains(f.out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, f.out)
		}
	}
}

func TestSwitchoverErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db9", Force: true}), ExitUnknownMember)
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db1", Force: true}), ExitRejected)

	lagging := time.Hour
	cl, _ := f.cli.Store.Cluster(ctx)
	rec, _ := cl.Member("db2")
	rec.Lag = &lagging
	rec.Tags = map[string]string{"zone": "b"} // a non-volatile change, so the store writes at once
	f.stores["db2"].UpdateMember(ctx, rec)
	err := f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true})
	exitCode(t, err, ExitUnhealthy)
	if !strings.Contains(err.Error(), "exceeds maximum_lag_on_failover") {
		t.Fatalf("unhealthy target message: %v", err)
	}

	// Without --force it asks, and "no" changes nothing.
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db3"}), ExitAborted)
	if cl, _ := f.cli.Store.Cluster(ctx); cl.Switchover != nil {
		t.Fatal("aborted switchover left a request")
	}
	f.cli.In = strings.NewReader("y\n")
	if err := f.cli.Switchover(ctx, SwitchoverOptions{To: "db3"}); err != nil {
		t.Fatal(err)
	}
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db3", Force: true}), ExitPending)

	// --wait times out when no agent acts on the request.
	f.stores["agentctl"].ClearSwitchover(ctx, mustCluster(t, f).Switchover.Version)
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db3", Force: true, Wait: true, Timeout: 100 * time.Millisecond}), ExitTimeout)
}

// handOver plays the agents of a switchover: from hands the lock to to,
// which reports itself primary and clears the pending request.
func (f *fixture) handOver(t *testing.T, from, to string) {
	t.Helper()
	ctx := context.Background()
	if err := f.stores[from].HandoverLeader(ctx, to, f.stores[to].Instance()); err != nil {
		t.Fatal(err)
	}
	cl := mustCluster(t, f)
	rec, _ := cl.Member(to)
	rec.Role = dcs.RolePrimary
	f.stores[to].UpdateMember(ctx, rec)
	f.stores[to].ClearSwitchover(ctx, cl.Switchover.Version)
}

func mustCluster(t *testing.T, f *fixture) *dcs.Cluster {
	t.Helper()
	cl, err := f.cli.Store.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestSwitchoverWaitsForTheNewPrimary(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		done <- f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true, Wait: true, Timeout: 5 * time.Second})
	}()
	waitFor(t, func() bool { return mustCluster(t, f).Switchover != nil })
	f.handOver(t, "db1", "db2")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "db2 is the primary and accepts writes") {
		t.Fatalf("output: %s", f.out)
	}
}

func TestSwitchoverRejectedByLeader(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		done <- f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true, Wait: true, Timeout: 5 * time.Second})
	}()
	waitFor(t, func() bool { return mustCluster(t, f).Switchover != nil })
	f.stores["db1"].ClearSwitchover(ctx, mustCluster(t, f).Switchover.Version)
	exitCode(t, <-done, ExitRejected)
}

func TestNoLeaderAndFailover(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	exitCode(t, f.cli.Failover(ctx, FailoverOptions{To: "db2", Force: true}), ExitRejected) // leader is healthy
	exitCode(t, f.cli.Failover(ctx, FailoverOptions{Force: true}), ExitUsage)
	f.srv.ExpireLeader()
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{Force: true}), ExitNoLeader)
	exitCode(t, f.cli.Failover(ctx, FailoverOptions{To: "nope", Force: true}), ExitUnknownMember)

	cl := mustCluster(t, f)
	rec, _ := cl.Member("db3")
	rec.Tags = map[string]string{"errant": "0-3-5"}
	f.stores["db3"].UpdateMember(ctx, rec)
	err := f.cli.Failover(ctx, FailoverOptions{To: "db3", Force: true})
	exitCode(t, err, ExitUnhealthy)
	if !strings.Contains(err.Error(), "--allow-errant") {
		t.Fatalf("message does not name the override: %v", err)
	}
	if err := f.cli.Failover(ctx, FailoverOptions{To: "db3", Force: true, AllowErrant: true}); err != nil {
		t.Fatal(err)
	}
	sw := mustCluster(t, f).Switchover
	if sw == nil || sw.To != "db3" || sw.From != "" || !sw.Force {
		t.Fatalf("failover request %+v", sw)
	}
	exitCode(t, f.cli.Failover(ctx, FailoverOptions{To: "db2", Force: true}), ExitPending)
}

func TestPauseResumeAndHistory(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for range 2 { // idempotent
		if err := f.cli.SetPaused(ctx, true, false, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if !mustCluster(t, f).Config.Paused {
		t.Fatal("not paused")
	}
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true}), ExitRejected)
	if err := f.cli.SetPaused(ctx, false, true, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if mustCluster(t, f).Config.Paused {
		t.Fatal("still paused")
	}
	f.stores["db1"].AppendHistory(ctx, dcs.HistoryEntry{Kind: dcs.HistoryFailover, From: "db0", To: "db1",
		At: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Reason: "leader lost"})
	f.out.Reset()
	if err := f.cli.History(ctx, Table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.out.String(), "2026-12-02T03:00:00Z  failover  db0   db1  leader lost") {
		t.Fatalf("history:\n%s", f.out)
	}
}

func TestExitCodes(t *testing.T) {
	cases := map[error]int{
		nil:                    ExitOK,
		errors.New("x"):        ExitError,
		dcs.ErrUnreachable:     ExitUnreachable,
		dcs.ErrForbidden:       ExitUnreachable,
		fail(ExitTimeout, "t"): ExitTimeout,
	}
	for err, want := range cases {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A replica cut from its source shows why (its receiver connecting), its
// grown lag and that it is lagging, in the table and in JSON.
func TestStatusShowsAReceiverThatIsNotReceiving(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cl, _ := f.cli.Store.Cluster(ctx)
	rec, _ := cl.Member("db3")
	behind := 2 * time.Hour
	rec.Replication, rec.Receiver, rec.Lag = dcs.ReplicationStopped, dcs.ReceiverConnecting, &behind
	rec.Tags = map[string]string{failover.TagLagging: "over 30s"}
	if err := f.stores["db3"].UpdateMember(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.cli.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
	if want := "db3     replica  stopped (receiver connecting)  7200    3        0-1-97   lagging"; !strings.Contains(f.out.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, f.out)
	}
	f.out.Reset()
	if err := f.cli.Status(ctx, JSON, false); err != nil {
		t.Fatal(err)
	}
	var v StatusView
	if err := json.Unmarshal(f.out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	row := v.Members[2]
	if row.Name != "db3" || row.Receiver != "connecting" || row.LagSeconds == nil || *row.LagSeconds != behind.Seconds() {
		t.Fatalf("JSON row %+v, want db3 with receiver connecting and lag_seconds 7200", row)
	}
	f.out.Reset()
	if err := f.cli.Describe(ctx, Table, "db3"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Receiver:", "connecting", "Lag (s):", "7200"} {
		if !strings.Contains(f.out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, f.out)
		}
	}
}

// agentctl refuses to hand the lock to a member being rebuilt, whether a
// reinit request is pending for it or its record says so.
func TestSwitchoverToARebuildingMemberIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.Store.RequestReinit(ctx, dcs.Reinit{Member: "db2", Donor: "db3"}); err != nil {
		t.Fatal(err)
	}
	err := f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true})
	exitCode(t, err, ExitUnhealthy)
	if !strings.Contains(err.Error(), "being rebuilt") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	f.stores["agentctl"].ClearReinit(ctx, mustCluster(t, f).Reinit.Version)
	rec, _ := mustCluster(t, f).Member("db3")
	rec.Tags = map[string]string{failover.TagRebuilding: "from db2"}
	f.stores["db3"].UpdateMember(ctx, rec)
	exitCode(t, f.cli.Switchover(ctx, SwitchoverOptions{To: "db3", Force: true}), ExitUnhealthy)
}

// TestSwitchoverRefusalReasonReachesTheOperator: switchover --wait fails
// with the reason the leader recorded in the history when it refused the
// request, and --allow-lag is what the request carries as Force.
func TestSwitchoverRefusalReasonReachesTheOperator(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.stores["db1"].AppendHistory(ctx, dcs.HistoryEntry{Kind: dcs.HistorySwitchoverRejected, From: "db1", To: "db2",
		At: time.Now(), Reason: "an older refusal"})
	done := make(chan error, 1)
	go func() {
		done <- f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", Force: true, Wait: true, Timeout: 5 * time.Second})
	}()
	waitFor(t, func() bool { return mustCluster(t, f).Switchover != nil })
	if mustCluster(t, f).Switchover.Force {
		t.Fatal("a switchover without --allow-lag asks to allow lag")
	}
	const why = "switchover target db2 has not applied 4213 of db1's transactions (limit 1000)"
	f.stores["db1"].AppendHistory(ctx, dcs.HistoryEntry{Kind: dcs.HistorySwitchoverRejected, From: "db1", To: "db2", At: time.Now(), Reason: why})
	f.stores["db1"].ClearSwitchover(ctx, mustCluster(t, f).Switchover.Version)
	err := <-done
	exitCode(t, err, ExitRejected)
	if !strings.Contains(err.Error(), why) {
		t.Fatalf("error %q lacks the leader's reason %q", err, why)
	}

	go func() {
		done <- f.cli.Switchover(ctx, SwitchoverOptions{To: "db2", AllowLag: true, Force: true, Wait: true, Timeout: 5 * time.Second})
	}()
	waitFor(t, func() bool { return mustCluster(t, f).Switchover != nil })
	if !mustCluster(t, f).Switchover.Force {
		t.Fatal("--allow-lag is not in the request")
	}
	f.stores["db1"].ClearSwitchover(ctx, mustCluster(t, f).Switchover.Version)
	if err := <-done; strings.Contains(err.Error(), why) {
		t.Fatalf("error %q repeats the previous request's refusal", err)
	}
}

// TestMemberState: a member being rebuilt says so and from whom, before
// the errant transactions that are about to go.
func TestMemberState(t *testing.T) {
	for _, tc := range []struct {
		m    dcs.Member
		want string
	}{
		{dcs.Member{Stale: true, Tags: map[string]string{"rebuilding": "from db3"}}, "stale"},
		{dcs.Member{Tags: map[string]string{"rebuilding": "from db3", "errant": "0-1-9"}}, "rebuilding from db3"},
		{dcs.Member{Tags: map[string]string{"errant": "0-1-9"}, Replication: dcs.ReplicationRunning}, "errant"},
		{dcs.Member{Replication: dcs.ReplicationRunning}, "streaming"},
		{dcs.Member{Tags: map[string]string{"restarting": "since 03:04:05"}, Replication: dcs.ReplicationStopped}, "restarting since 03:04:05"},
	} {
		if got := memberState(tc.m); got != tc.want {
			t.Errorf("memberState(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
