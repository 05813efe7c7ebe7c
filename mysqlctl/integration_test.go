package mysqlctl_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/internal/pemfiles"
	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
	"github.com/mysqlha/mysqlha/testenv/testcerts"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connect logs in as the agent user, with the documented least privileges.
func connect(t testing.TB, s *mysqltest.Server) *mysqlctl.Instance {
	t.Helper()
	inst, err := mysqlctl.Connect(ctxT(t, 10*time.Second), mysqlctl.Config{
		Addr:             s.Addr(),
		User:             mysqltest.AgentUser,
		PasswordFile:     s.PasswordFile(t, mysqltest.AgentPassword),
		ReplicationUsers: []string{mysqltest.ReplUser},
	})
	if err != nil {
		t.Fatalf("connecting to %s: %v", s.Name, err)
	}
	t.Cleanup(func() { inst.Close() })
	return inst
}

func sourceOf(s *mysqltest.Server) mysqlctl.Source {
	return mysqlctl.Source{Host: s.Host, Port: s.Port, User: mysqltest.ReplUser, Password: mysqltest.ReplPassword,
		ConnectRetry: time.Second, HeartbeatPeriod: time.Second}
}

type topology struct {
	servers   []*mysqltest.Server
	primary   *mysqlctl.Instance
	replicas  []*mysqlctl.Instance
	appWriter *sql.DB
}

// buildTopology makes db1 the writable primary and db2, db3 fenced replicas
// of it, purely through mysqlctl.
func buildTopology(t *testing.T) *topology {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	servers := mysqltest.Start(t, 3)
	top := &topology{servers: servers, primary: connect(t, servers[0])}
	if err := top.primary.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers[1:] {
		r := connect(t, s)
		if err := r.Fence(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.ReplicateFrom(ctx, sourceOf(servers[0])); err != nil {
			t.Fatal(err)
		}
		top.replicas = append(top.replicas, r)
	}
	top.appWriter = servers[0].DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	mustExec(t, top.appWriter, "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(32))")
	return top
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func executed(t testing.TB, inst *mysqlctl.Instance) string {
	t.Helper()
	st, err := inst.Status(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return st.GTIDExecuted
}

func TestTopologyReplicates(t *testing.T) {
	top := buildTopology(t)
	ctx := ctxT(t, 30*time.Second)
	for i := range 10 {
		mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (?, ?)", i, fmt.Sprintf("row-%d", i))
	}
	want := executed(t, top.primary)
	if want == "" {
		t.Fatal("primary reports an empty executed GTID position after writes")
	}
	for k, r := range top.replicas {
		if err := r.WaitForGTID(ctx, want, 10*time.Second); err != nil {
			t.Fatalf("replica %d: %v", k, err)
		}
		var n int
		if err := top.servers[k+1].RootDB(t).QueryRow("SELECT COUNT(*) FROM app.t").Scan(&n); err != nil || n != 10 {
			t.Fatalf("replica %d has %d rows (err %v), want 10", k, n, err)
		}
		obs, err := r.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rs := obs.Replica
		if rs == nil || !rs.Streaming() || rs.Broken() {
			t.Fatalf("replica %d status: %+v", k, rs)
		}
		if rs.SourceHost != top.servers[0].Host || rs.SourcePort != top.servers[0].Port || !rs.AutoPosition {
			t.Errorf("replica %d source %s:%d auto=%v", k, rs.SourceHost, rs.SourcePort, rs.AutoPosition)
		}
		if rs.ExecutedGTID != want || rs.RetrievedGTID != want || obs.Status.GTIDExecuted != want {
			t.Errorf("replica %d executed %q retrieved %q binlog %q, want %q", k, rs.ExecutedGTID, rs.RetrievedGTID, obs.Status.GTIDExecuted, want)
		}
		if rs.SecondsBehind == nil || *rs.SecondsBehind > 5 {
			t.Errorf("replica %d lag %v", k, rs.SecondsBehind)
		}
		if obs.Status.Writable() || obs.Status.ServerID != uint32(k+2) || !obs.Status.LogBin || !obs.Status.LogReplicaUpdates || !obs.Status.GTIDStrictMode {
			t.Errorf("replica %d status %+v", k, obs.Status)
		}
	}
	pobs, err := top.primary.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pobs.Replica != nil || !pobs.Status.Writable() || pobs.Status.Server.Flavor != gtid.MariaDB {
		t.Errorf("primary observation %+v", pobs)
	}
	if _, err := gtid.ParseMariaDBPos(want); err != nil {
		t.Errorf("primary GTID %q does not parse: %v", want, err)
	}

	// Reset is idempotent and leaves a server that is no replica.
	r := top.replicas[1]
	for range 2 {
		if err := r.ResetReplication(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ReplicaStatus(ctx); !errors.Is(err, mysqlctl.ErrNotReplica) {
		t.Fatalf("after reset: %v, want ErrNotReplica", err)
	}
	if err := r.StopReplication(ctx); err != nil {
		t.Fatalf("stopping replication on a non-replica: %v", err)
	}
	// Repointing resumes exactly where it left off.
	mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (100, 'after-reset')")
	if err := r.ReplicateFrom(ctx, sourceOf(top.servers[0])); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForGTID(ctx, executed(t, top.primary), 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// Swap roles: db3 becomes the primary and the former primary, which
	// wrote everything itself, resumes after its own last transaction.
	newPrimary, oldPrimary := r, top.primary
	for _, inst := range []*mysqlctl.Instance{oldPrimary, newPrimary} {
		if err := inst.Fence(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := newPrimary.ResetReplication(ctx); err != nil {
		t.Fatal(err)
	}
	if err := newPrimary.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := oldPrimary.ReplicateFrom(ctx, sourceOf(top.servers[2])); err != nil {
		t.Fatal(err)
	}
	mustExec(t, top.servers[2].DB(t, mysqltest.AppUser, mysqltest.AppPassword), "INSERT INTO app.t VALUES (200, 'new primary')")
	if err := oldPrimary.WaitForGTID(ctx, executed(t, newPrimary), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rs, err := oldPrimary.ReplicaStatus(ctx)
	if err != nil || !rs.Streaming() || rs.Broken() {
		t.Fatalf("former primary as replica: %+v %v", rs, err)
	}
}

func TestFenceStopsOrdinaryWrites(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	inst := connect(t, s)
	ctx := ctxT(t, 20*time.Second)
	app := s.DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	mustExec(t, app, "CREATE TABLE app.f (id INT PRIMARY KEY)")
	for range 2 { // idempotent
		if err := inst.Fence(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := app.Exec("INSERT INTO app.f VALUES (1)")
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1290 {
		t.Fatalf("write after fence: %v, want error 1290 (read-only)", err)
	}
	st, err := inst.Status(ctx)
	if err != nil || st.Writable() || !st.ReadOnly {
		t.Fatalf("status after fence: %+v, %v", st, err)
	}
	if err := inst.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, app, "INSERT INTO app.f VALUES (2)")
}

func TestFenceDoesNotWaitForOpenTransactions(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	inst := connect(t, s)
	app := s.DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	mustExec(t, app, "CREATE TABLE app.f (id INT PRIMARY KEY)")
	mustExec(t, app, "CREATE TABLE app.g (id INT PRIMARY KEY)")
	tx, err := app.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO app.f VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// A second session holds an explicit table lock, which read_only waits for.
	lock, err := s.DB(t, mysqltest.AppUser, mysqltest.AppPassword).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(context.Background(), "LOCK TABLES app.g WRITE"); err != nil {
		t.Fatal(err)
	}

	ctx := ctxT(t, 6*time.Second)
	if err := inst.Fence(ctx); err != nil {
		t.Fatalf("fence with open transaction and table lock: %v", err)
	}
	if err := tx.Commit(); err == nil {
		var n int
		s.RootDB(t).QueryRow("SELECT COUNT(*) FROM app.f").Scan(&n)
		if n != 0 {
			t.Fatalf("a transaction committed after the fence (%d rows)", n)
		}
	}
	st, err := inst.Status(ctxT(t, 5*time.Second))
	if err != nil || st.Writable() {
		t.Fatalf("after fence: %+v %v", st, err)
	}
}

func TestKillClientsSparesReplication(t *testing.T) {
	top := buildTopology(t)
	ctx := ctxT(t, 30*time.Second)
	conn, err := top.appWriter.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET @session_marker = 1"); err != nil {
		t.Fatal(err)
	}
	killed, err := top.primary.KillClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if killed < 1 {
		t.Fatalf("killed %d sessions, want at least the application's", killed)
	}
	if _, err := conn.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Fatal("the application session survived KillClients")
	}
	// KILL CONNECTION returns once the session is marked killed; its
	// thread leaves the process list a moment later (seen as "Busy").
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conns, err := top.primary.Connections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left := mysqlctl.ClientConnections(conns, mysqltest.AgentUser, mysqltest.ReplUser)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client sessions left 5s after KillClients: %+v", left)
		}
	}
	// Replication survived: a new write still arrives on both replicas.
	mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (1, 'after-kill')")
	want := executed(t, top.primary)
	for k, r := range top.replicas {
		if err := r.WaitForGTID(ctx, want, 10*time.Second); err != nil {
			t.Fatalf("replica %d after KillClients: %v", k, err)
		}
		rs, err := r.ReplicaStatus(ctx)
		if err != nil || !rs.Streaming() {
			t.Fatalf("replica %d: %+v %v", k, rs, err)
		}
	}
}

func TestWaitForGTID(t *testing.T) {
	top := buildTopology(t)
	ctx := ctxT(t, 30*time.Second)
	r := top.replicas[0]
	mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (1, 'a')")
	if err := r.WaitForGTID(ctx, executed(t, top.primary), 10*time.Second); err != nil {
		t.Fatalf("caught-up replica: %v", err)
	}
	if err := r.StopReplication(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (2, 'b')")
	want := executed(t, top.primary)
	start := time.Now()
	err := r.WaitForGTID(ctx, want, 1500*time.Millisecond)
	if !errors.Is(err, mysqlctl.ErrTimeout) {
		t.Fatalf("stopped replica: %v, want ErrTimeout", err)
	}
	if waited := time.Since(start); waited < 1400*time.Millisecond || waited > 5*time.Second {
		t.Errorf("timed out after %s, want about 1.5s", waited)
	}
	done := make(chan error, 1)
	go func() { done <- r.WaitForGTID(ctx, want, 20*time.Second) }()
	if err := r.StartReplication(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := r.WaitForGTID(ctx, "0-1-x", time.Second); !errors.Is(err, gtid.ErrMalformed) {
		t.Fatalf("malformed position: %v, want gtid.ErrMalformed", err)
	}
	if err := r.WaitForGTID(ctx, want, 0); !errors.Is(err, mysqlctl.ErrInvalidConfig) {
		t.Fatalf("zero timeout: %v, want ErrInvalidConfig", err)
	}
}

// TestSemiSyncRequiresAcknowledgement proves the primary really waits: with
// every replica's receiver stopped, a commit returns only after the timeout.
func TestSemiSyncRequiresAcknowledgement(t *testing.T) {
	top := buildTopology(t)
	ctx := ctxT(t, 60*time.Second)
	const timeout = 2 * time.Second
	if err := top.primary.SetSemiSyncSource(ctx, true, timeout, 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range top.replicas {
		if err := r.SetSemiSyncReplica(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "both replicas acknowledging", func() bool {
		st, err := top.primary.Status(ctx)
		return err == nil && st.SemiSync.SourceClients == 2 && st.SemiSync.SourceActive
	})
	if st, err := top.primary.Status(ctx); err != nil || st.SemiSync.WaitPoint != mysqlctl.WaitPointAfterSync {
		t.Fatalf("wait point %q (%v), want %s", st.SemiSync.WaitPoint, err, mysqlctl.WaitPointAfterSync)
	}
	start := time.Now()
	mustExec(t, top.appWriter, "INSERT INTO app.t VALUES (1, 'acked')")
	if d := time.Since(start); d >= timeout {
		t.Fatalf("acknowledged commit took %s, as long as the timeout", d)
	}
	for _, r := range top.replicas {
		st, err := r.Status(ctx)
		if err != nil || !st.SemiSync.ReplicaEnabled || !st.SemiSync.ReplicaActive || st.SemiSync.SourceEnabled {
			t.Fatalf("replica semi-sync %+v %v", st.SemiSync, err)
		}
		if err := r.StopReplicationIO(ctx); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	committed := make(chan error, 1)
	go func() {
		_, err := top.appWriter.Exec("INSERT INTO app.t VALUES (2, 'unacked')")
		committed <- err
	}()
	// While the commit waits, the primary shows it waiting, and (AFTER_SYNC)
	// no other session sees the row that no replica has.
	waitFor(t, timeout/2, "the commit waiting for an acknowledgement", func() bool {
		st, err := top.primary.Status(ctx)
		return err == nil && st.SemiSync.SourceWaitSessions == 1
	})
	var visible int
	if err := top.servers[0].RootDB(t).QueryRow("SELECT COUNT(*) FROM app.t WHERE id = 2").Scan(&visible); err != nil {
		t.Fatal(err)
	}
	if visible != 0 {
		t.Errorf("another session sees a commit that waits for its acknowledgement: the wait point is not AFTER_SYNC")
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("commit with no replica receiving returned after %s, before the %s semi-sync timeout", d, timeout)
	}
	st, err := top.primary.Status(ctx)
	if err != nil || st.SemiSync.SourceActive || !st.SemiSync.SourceEnabled || st.SemiSync.SourceTimeout != timeout {
		t.Fatalf("after the timeout the source should have fallen back to async: %+v %v", st.SemiSync, err)
	}
	// Switching off is idempotent.
	for range 2 {
		if err := top.primary.SetSemiSyncSource(ctx, false, timeout, 1); err != nil {
			t.Fatal(err)
		}
		if err := top.replicas[0].SetSemiSyncReplica(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestResetBinaryLogs(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	inst := connect(t, s)
	ctx := ctxT(t, 10*time.Second)
	mustExec(t, s.RootDB(t), "CREATE TABLE app.r (id INT PRIMARY KEY)")
	if executed(t, inst) == "" {
		t.Fatal("no GTID after a write")
	}
	if err := inst.ResetBinaryLogs(ctx); err != nil {
		t.Fatal(err)
	}
	if got := executed(t, inst); got != "" {
		t.Fatalf("after reset: executed %q, want empty", got)
	}
}

// SHUTDOWN stops the server, and Uptime restarts from zero with it:
// agentctl restart does the one and tells a restart already done by the
// other.
func TestShutdownAndUptime(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	ctx := ctxT(t, 60*time.Second)
	time.Sleep(5 * time.Second) // Uptime counts whole seconds; a restart takes about 2
	inst := connect(t, s)
	before, err := inst.Uptime(ctx)
	if err != nil || before < 4*time.Second {
		t.Fatalf("uptime of a server up for 5 s: %v, %v", before, err)
	}
	if err := inst.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("mysqld still runs 30 s after SHUTDOWN")
		}
	}
	s.Stop() // reaps the exited process
	s.Restart(t)
	after, err := connect(t, s).Uptime(ctx)
	if err != nil || after >= before {
		t.Fatalf("uptime after a restart: %v, %v; before it %v", after, err, before)
	}
}

func TestBadInput(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	ctx := ctxT(t, 20*time.Second)

	t.Run("unreachable host", func(t *testing.T) {
		_, err := mysqlctl.Connect(ctx, mysqlctl.Config{Addr: "127.0.0.1:1", User: "x", DialTimeout: time.Second})
		if !errors.Is(err, mysqlctl.ErrUnreachable) || !errors.Is(err, mysqlctl.ErrDown) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("got %v, want ErrUnreachable and ErrDown naming the address", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		_, err := mysqlctl.Connect(ctx, mysqlctl.Config{Addr: s.Addr(), User: mysqltest.AgentUser,
			PasswordFile: s.PasswordFile(t, "wrong")})
		if !errors.Is(err, mysqlctl.ErrAccessDenied) || strings.Contains(err.Error(), "wrong") {
			t.Fatalf("got %v, want ErrAccessDenied without the password in it", err)
		}
	})
	t.Run("missing password file", func(t *testing.T) {
		_, err := mysqlctl.Connect(ctx, mysqlctl.Config{Addr: s.Addr(), User: "x", PasswordFile: "/nonexistent/pw"})
		if !errors.Is(err, mysqlctl.ErrInvalidConfig) || !strings.Contains(err.Error(), "/nonexistent/pw") {
			t.Fatalf("got %v, want ErrInvalidConfig naming the file", err)
		}
	})
	t.Run("empty settings", func(t *testing.T) {
		_, err := mysqlctl.Connect(ctx, mysqlctl.Config{DialTimeout: -time.Second})
		if !errors.Is(err, mysqlctl.ErrInvalidConfig) || !strings.Contains(err.Error(), "address is empty") ||
			!strings.Contains(err.Error(), "negative") {
			t.Fatalf("got %v", err)
		}
	})
	inst := connect(t, s)
	t.Run("replica status of a non-replica", func(t *testing.T) {
		if _, err := inst.ReplicaStatus(ctx); !errors.Is(err, mysqlctl.ErrNotReplica) {
			t.Fatalf("got %v, want ErrNotReplica", err)
		}
	})
	t.Run("malformed GTID", func(t *testing.T) {
		for _, bad := range []string{"garbage", "0-1", "0-1-2,0-1-3", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"} {
			if err := inst.WaitForGTID(ctx, bad, time.Second); !errors.Is(err, gtid.ErrMalformed) {
				t.Errorf("%q: got %v, want gtid.ErrMalformed", bad, err)
			}
		}
	})
	t.Run("bad source", func(t *testing.T) {
		for _, src := range []mysqlctl.Source{{Port: 3306, User: "r"}, {Host: "h", Port: 70000, User: "r"}, {Host: "h", Port: 1}} {
			if err := inst.ReplicateFrom(ctx, src); !errors.Is(err, mysqlctl.ErrInvalidConfig) {
				t.Errorf("%+v: got %v, want ErrInvalidConfig", src, err)
			}
		}
		if _, err := inst.ReplicaStatus(ctx); !errors.Is(err, mysqlctl.ErrNotReplica) {
			t.Fatalf("a rejected source was half-applied: %v", err)
		}
	})
	t.Run("missing privilege", func(t *testing.T) {
		app, err := mysqlctl.Connect(ctx, mysqlctl.Config{Addr: s.Addr(), User: mysqltest.AppUser,
			PasswordFile: s.PasswordFile(t, mysqltest.AppPassword)})
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		if err := app.Fence(ctx); !errors.Is(err, mysqlctl.ErrPrivilege) {
			t.Fatalf("got %v, want ErrPrivilege", err)
		}
	})
	t.Run("server gone", func(t *testing.T) {
		s.Kill()
		if _, err := inst.Observe(ctx); !errors.Is(err, mysqlctl.ErrUnreachable) {
			t.Fatalf("got %v, want ErrUnreachable", err)
		}
	})
}

// BenchmarkObserve measures one full observe pass (variables, semi-sync
// status, replica status with GTIDs) against a live MariaDB replica.
func BenchmarkObserve(b *testing.B) {
	servers := mysqltest.Start(b, 2)
	ctx := context.Background()
	primary, replica := connect(b, servers[0]), connect(b, servers[1])
	if err := primary.Unfence(ctx); err != nil {
		b.Fatal(err)
	}
	if err := replica.ReplicateFrom(ctx, sourceOf(servers[0])); err != nil {
		b.Fatal(err)
	}
	mustExec(b, servers[0].RootDB(b), "CREATE TABLE app.b (id INT PRIMARY KEY)")
	if err := replica.WaitForGTID(ctx, executed(b, primary), 10*time.Second); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		obs, err := replica.Observe(ctx)
		if err != nil || obs.Replica == nil {
			b.Fatal(obs, err)
		}
	}
}

// TestCrashRecoveryTruncatesUnacknowledgedTail pins the MariaDB settings
// that lossless mode documents for every server: started with
// --rpl-semi-sync-slave-enabled=ON and --init-rpl-role=SLAVE, a primary
// killed while a commit waits for its acknowledgement rolls that commit
// back at crash recovery and cuts it off its binary log (MDEV-21117), so
// it rejoins without an errant transaction. Without --init-rpl-role=SLAVE,
// 10.11.19 commits it (measured).
func TestCrashRecoveryTruncatesUnacknowledgedTail(t *testing.T) {
	servers := mysqltest.Start(t, 2, mysqltest.Options{ExtraArgs: []string{"--rpl-semi-sync-slave-enabled=ON", "--init-rpl-role=SLAVE"}})
	ctx := ctxT(t, 60*time.Second)
	primary, replica := connect(t, servers[0]), connect(t, servers[1])
	if err := primary.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicateFrom(ctx, sourceOf(servers[0])); err != nil {
		t.Fatal(err)
	}
	if err := primary.SetSemiSyncSource(ctx, true, time.Hour, 1); err != nil {
		t.Fatal(err)
	}
	app := servers[0].DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	mustExec(t, app, "CREATE TABLE app.t (id INT PRIMARY KEY)")
	mustExec(t, app, "INSERT INTO app.t VALUES (1)")
	acked := executed(t, primary)
	if err := replica.StopReplicationIO(ctx); err != nil {
		t.Fatal(err)
	}
	go app.Exec("INSERT INTO app.t VALUES (2)") // waits for an acknowledgement that never comes
	waitFor(t, 5*time.Second, "the commit waiting", func() bool {
		st, err := primary.Status(ctx)
		return err == nil && st.SemiSync.SourceWaitSessions == 1
	})
	servers[0].Kill()
	servers[0].Restart(t)
	if got := executed(t, connect(t, servers[0])); got != acked {
		t.Fatalf("after crash recovery the binlog is at %s, want %s: the unacknowledged commit survived", got, acked)
	}
}

// TestTLS against live MariaDB servers that refuse insecure transport: the
// agent's connection works only with TLS verifying the server, and a replica
// streams from its source over TLS, verifying it too.
func TestTLS(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	servers := mysqltest.Start(t, 2, mysqltest.Options{ExtraArgs: []string{
		"--ssl-ca=" + certs.CA, "--ssl-cert=" + certs.ServerCert, "--ssl-key=" + certs.ServerKey, "--require-secure-transport=ON"}})
	ctx := ctxT(t, 30*time.Second)
	cfg := func(s *mysqltest.Server, tlsCfg *tls.Config) mysqlctl.Config {
		return mysqlctl.Config{Addr: s.Addr(), User: mysqltest.AgentUser, PasswordFile: s.PasswordFile(t, mysqltest.AgentPassword), TLS: tlsCfg}
	}
	if _, err := mysqlctl.Connect(ctx, cfg(servers[0], nil)); err == nil {
		t.Fatal("connected without TLS to a server that requires it")
	}
	pool, err := pemfiles.CAPool("--mysql-tls-ca", certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mysqlctl.Connect(ctx, cfg(servers[0], &tls.Config{RootCAs: x509.NewCertPool()})); err == nil {
		t.Fatal("connected over TLS to a server whose certificate it cannot verify")
	}
	var insts []*mysqlctl.Instance
	for _, s := range servers {
		inst, err := mysqlctl.Connect(ctx, cfg(s, &tls.Config{RootCAs: pool}))
		if err != nil {
			t.Fatalf("connecting over TLS: %v", err)
		}
		t.Cleanup(func() { inst.Close() })
		insts = append(insts, inst)
	}
	if err := insts[0].Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	src := sourceOf(servers[0])
	src.TLS = &mysqlctl.SourceTLS{CA: certs.CA}
	if err := insts[1].ReplicateFrom(ctx, src); err != nil {
		t.Fatal(err)
	}
	root := servers[0].RootDB(t) // over the socket, which needs no TLS
	mustExec(t, root, "CREATE TABLE app.t (id INT PRIMARY KEY)")
	mustExec(t, root, "INSERT INTO app.t VALUES (1)")
	want := executed(t, insts[0])
	// The source refuses insecure transport: streaming at all is over TLS.
	waitFor(t, 10*time.Second, "the replica to stream over TLS", func() bool { return executed(t, insts[1]) == want })
	st, err := insts[1].Observe(ctx)
	if err != nil || st.Replica == nil || !st.Replica.Streaming() {
		t.Fatalf("replica status %+v %v", st.Replica, err)
	}
}

// TestDeadmanSwitch proves the dead-man switch on a real server: armed and
// left alone, the server fences itself, without any client; pushed back in
// time, it stays writable; and none of it reaches the binary log, hence no
// replica.
func TestDeadmanSwitch(t *testing.T) {
	servers := mysqltest.Start(t, 2)
	primary, replica := connect(t, servers[0]), connect(t, servers[1])
	ctx := ctxT(t, 60*time.Second)
	if err := replica.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicateFrom(ctx, sourceOf(servers[0])); err != nil {
		t.Fatal(err)
	}
	root := servers[0].RootDB(t)
	readOnly := func() bool {
		t.Helper()
		var ro bool
		if err := root.QueryRow("SELECT @@global.read_only").Scan(&ro); err != nil {
			t.Fatal(err)
		}
		return ro
	}
	binlogPos := func() string {
		t.Helper()
		var pos string
		if err := root.QueryRow("SELECT @@global.gtid_binlog_pos").Scan(&pos); err != nil {
			t.Fatal(err)
		}
		return pos
	}
	app := servers[0].DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	mustExec(t, app, "CREATE TABLE app.t (id INT PRIMARY KEY)")
	before := binlogPos()

	t.Run("extended stays writable", func(t *testing.T) {
		// The server keeps whole seconds, so 1.5 s fires 0.5 to 1.5 s
		// later: pushed back every 200 ms for 4 s, it never fires.
		for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if err := primary.ArmDeadman(ctx, 1500*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if readOnly() {
				t.Fatal("the server fenced itself although the dead-man switch was pushed back in time")
			}
		}
	})

	t.Run("left alone fences", func(t *testing.T) {
		if readOnly() {
			t.Fatal("precondition: the server should be writable")
		}
		armed := time.Now()
		if err := primary.ArmDeadman(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		for !readOnly() {
			if time.Since(armed) > 2500*time.Millisecond {
				t.Fatal("armed for 1 s and not pushed back, the server is still writable after 2.5 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("read-only %v after arming for 1 s", time.Since(armed).Round(time.Millisecond))
		if _, err := app.Exec("INSERT INTO app.t VALUES (1)"); err == nil {
			t.Fatal("the application still writes after the dead-man switch fired")
		}
	})

	t.Run("re-armed after firing", func(t *testing.T) {
		if err := primary.Unfence(ctx); err != nil {
			t.Fatal(err)
		}
		if err := primary.ArmDeadman(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for !readOnly() {
			if time.Now().After(deadline) {
				t.Fatal("the dead-man switch, armed again after it fired, did not fire again")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	if after := binlogPos(); after != before {
		t.Errorf("the dead-man switch reached the binary log: gtid_binlog_pos %q, then %q", before, after)
	}
	var events int
	if err := servers[1].RootDB(t).QueryRow("SELECT COUNT(*) FROM information_schema.EVENTS").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 0 {
		t.Errorf("the replica has %d events: the dead-man switch was replicated", events)
	}
	if err := primary.ArmDeadman(ctx, 500*time.Millisecond); !errors.Is(err, mysqlctl.ErrInvalidConfig) {
		t.Errorf("arming for 500 ms: %v, want ErrInvalidConfig (the server keeps whole seconds)", err)
	}
}

// TestDeadmanNeedsEventScheduler: a server that runs no events cannot be
// armed, and says so with ErrNoEventScheduler.
func TestDeadmanNeedsEventScheduler(t *testing.T) {
	s := mysqltest.Start(t, 1, mysqltest.Options{ExtraArgs: []string{"--event-scheduler=DISABLED"}})[0]
	err := connect(t, s).ArmDeadman(ctxT(t, 10*time.Second), time.Second)
	if !errors.Is(err, mysqlctl.ErrNoEventScheduler) {
		t.Fatalf("arming with event_scheduler=DISABLED: %v, want ErrNoEventScheduler", err)
	}
	t.Log(err)
}

// BenchmarkArmDeadman measures one push of the dead-man switch (the
// promotion's last step before unfencing) against a live MariaDB.
func BenchmarkArmDeadman(b *testing.B) {
	inst := connect(b, mysqltest.Start(b, 1)[0])
	ctx := context.Background()
	if err := inst.ArmDeadman(ctx, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := inst.ArmDeadman(ctx, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBinaryLogFiles: the agent user lists every binary log file by the
// path the server writes it at, oldest first.
func TestBinaryLogFiles(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	inst := connect(t, s)
	if _, err := s.RootDB(t).Exec("FLUSH BINARY LOGS"); err != nil {
		t.Fatal(err)
	}
	files, err := inst.BinaryLogFiles(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("BinaryLogFiles = %v, want at least 2 after FLUSH BINARY LOGS", files)
	}
	for i, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("file %d %s: %v", i, f, err)
		}
		if i > 0 && f <= files[i-1] {
			t.Errorf("files out of order: %v", files)
		}
	}
}
