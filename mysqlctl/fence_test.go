package mysqlctl_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// The fence tests give Fence the 1 s an agent gives it (retry_timeout) and
// a client that would make it wait far longer, and check from outside that
// the fence holds: read_only reads 1, the ordinary application user cannot
// write, and whatever the client was writing did not commit.

const fenceBudget = time.Second

// fenceTarget starts one writable server holding app.t = {(1, 0)}.
func fenceTarget(t *testing.T) (*mysqltest.Server, *mysqlctl.Instance, *sql.DB) {
	t.Helper()
	s := mysqltest.Start(t, 1)[0]
	inst := connect(t, s)
	if err := inst.Unfence(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	app := s.DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	mustExec(t, app, "CREATE TABLE app.t (id INT PRIMARY KEY, v INT NOT NULL)")
	mustExec(t, app, "INSERT INTO app.t VALUES (1, 0)")
	return s, inst, app
}

// session is one application connection held open for the whole test.
func session(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// execAsync runs q on c in the background; the channel yields its error.
func execAsync(c *sql.Conn, q string) <-chan error {
	result := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(context.Background(), q)
		result <- err
	}()
	return result
}

// mustFail waits for a background statement and fails the test unless it
// returned an error within limit.
func mustFail(t *testing.T, result <-chan error, what string, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-result:
		if err == nil {
			t.Fatalf("%s succeeded across the fence", what)
		}
		return err
	case <-time.After(limit):
		t.Fatalf("%s still running %s after the fence: its session was not killed", what, limit)
		return nil
	}
}

// fenceFast runs Fence with fenceBudget and fails the test unless it returns
// nil within the budget.
func fenceFast(t *testing.T, inst *mysqlctl.Instance) time.Duration {
	t.Helper()
	start := time.Now()
	err := inst.Fence(ctxT(t, fenceBudget))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Fence with a %s budget failed after %s: %v", fenceBudget, took, err)
	}
	if took >= fenceBudget {
		t.Fatalf("Fence took %s, its whole %s budget", took, fenceBudget)
	}
	t.Logf("fenced in %s", took.Round(time.Millisecond))
	return took
}

// assertFenced checks from outside that the fence holds: @@global.read_only
// reads 1, and a new session of the ordinary application user (no SUPER, no
// READ_ONLY ADMIN) gets error 1290 when it writes.
func assertFenced(t *testing.T, s *mysqltest.Server) {
	t.Helper()
	var ro int
	if err := s.RootDB(t).QueryRow("SELECT @@global.read_only").Scan(&ro); err != nil || ro != 1 {
		t.Fatalf("@@global.read_only = %d (%v), want 1", ro, err)
	}
	app := s.DB(t, mysqltest.AppUser, mysqltest.AppPassword)
	for _, q := range []string{"UPDATE app.t SET v = v + 100 WHERE id = 1", "INSERT INTO app.t VALUES (2, 2)"} {
		_, err := app.Exec(q)
		var myErr *mysql.MySQLError
		if !errors.As(err, &myErr) || myErr.Number != 1290 {
			t.Fatalf("%s by the application user after the fence: %v, want error 1290 (read-only)", q, err)
		}
	}
}

// rowValue reads app.t.v of row 1 as root.
func rowValue(t *testing.T, s *mysqltest.Server) int {
	t.Helper()
	var v int
	if err := s.RootDB(t).QueryRow("SELECT v FROM app.t WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitForState waits until a session runs a statement starting with prefix
// in the given state.
func waitForState(t *testing.T, s *mysqltest.Server, prefix, state string) {
	t.Helper()
	root := s.RootDB(t)
	waitFor(t, 10*time.Second, prefix+" in state "+state, func() bool {
		var n int
		err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE ID <> CONNECTION_ID() AND INFO LIKE ? AND STATE = ?", prefix+"%", state).Scan(&n)
		return err == nil && n > 0
	})
}

// TestFenceKillsLongStatement is the split brain this package once had: a
// statement running longer than the fence's budget kept SET GLOBAL
// read_only waiting until the budget was gone, and the server stayed
// writable.
func TestFenceKillsLongStatement(t *testing.T) {
	s, inst, app := fenceTarget(t)
	// v + 1 + SLEEP(8): the row changes only if the statement completes.
	update := execAsync(session(t, app), "UPDATE app.t SET v = v + 1 + SLEEP(8) WHERE id = 1")
	waitForState(t, s, "UPDATE app.t", "User sleep")

	fenceFast(t, inst)
	assertFenced(t, s)
	err := mustFail(t, update, "the 8 s UPDATE", 5*time.Second)
	t.Logf("the UPDATE's client got: %v", err)
	if v := rowValue(t, s); v != 0 {
		t.Fatalf("row changed to %d by a statement that ran across the fence", v)
	}
}

func TestFenceAgainstOpenTransaction(t *testing.T) {
	// An idle transaction does not block SET GLOBAL read_only; once the fence
	// holds its commit fails and its change rolls back.
	t.Run("idle", func(t *testing.T) {
		s, inst, app := fenceTarget(t)
		tx, err := app.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("UPDATE app.t SET v = 1 WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		fenceFast(t, inst)
		assertFenced(t, s)
		if err := tx.Commit(); err == nil {
			t.Fatal("a transaction opened before the fence committed after it")
		}
		// Rolled back: the row is unchanged and its lock is free.
		var v int
		if err := s.RootDB(t).QueryRow("SELECT v FROM app.t WHERE id = 1 FOR UPDATE NOWAIT").Scan(&v); err != nil || v != 0 {
			t.Fatalf("row 1 after the failed commit: v=%d, %v; want 0 and unlocked", v, err)
		}
	})
	// A second writer queued on the open transaction's row lock is a writing
	// statement (for up to innodb_lock_wait_timeout, 50 s), and blocks the
	// fence like any long statement.
	t.Run("writer queued on its row lock", func(t *testing.T) {
		s, inst, app := fenceTarget(t)
		holder := session(t, app)
		for _, q := range []string{"BEGIN", "UPDATE app.t SET v = 1 WHERE id = 1"} {
			if _, err := holder.ExecContext(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		writer := execAsync(session(t, app), "UPDATE app.t SET v = v + 10 WHERE id = 1")
		// "Updating" comes after the statement's locks on the table: it now
		// blocks the fence, and cannot finish before the holder does.
		waitForState(t, s, "UPDATE app.t SET v = v + 10", "Updating")

		fenceFast(t, inst)
		assertFenced(t, s)
		mustFail(t, writer, "the queued UPDATE", 5*time.Second)
		if _, err := holder.ExecContext(context.Background(), "COMMIT"); err == nil {
			t.Fatal("the open transaction committed after the fence")
		}
		if v := rowValue(t, s); v != 0 {
			t.Fatalf("row changed to %d: the uncommitted change was not rolled back", v)
		}
	})
}

func TestFenceKillsTableLock(t *testing.T) {
	s, inst, app := fenceTarget(t)
	lock := session(t, app)
	if _, err := lock.ExecContext(context.Background(), "LOCK TABLES app.t WRITE"); err != nil {
		t.Fatal(err)
	}
	fenceFast(t, inst)
	assertFenced(t, s)
	if _, err := lock.ExecContext(context.Background(), "UPDATE app.t SET v = 5 WHERE id = 1"); err == nil {
		t.Fatal("the session holding LOCK TABLES ... WRITE survived the fence and wrote")
	}
	if v := rowValue(t, s); v != 0 {
		t.Fatalf("row changed to %d", v)
	}
}

// TestFenceSparesReadersAndIsIdempotent: a fence nobody blocks kills
// nobody, and fencing a fenced server is one read.
func TestFenceSparesReadersAndIsIdempotent(t *testing.T) {
	s, inst, app := fenceTarget(t)
	idle := session(t, app)
	if _, err := idle.ExecContext(context.Background(), "SET @marker = 1"); err != nil {
		t.Fatal(err)
	}
	reader := session(t, app)
	read := make(chan error, 1)
	go func() {
		var n int
		read <- reader.QueryRowContext(context.Background(), "SELECT COUNT(*) + SLEEP(1) FROM app.t").Scan(&n)
	}()
	waitForState(t, s, "SELECT COUNT(*) + SLEEP", "User sleep")

	fenceFast(t, inst)
	assertFenced(t, s)
	if err := <-read; err != nil {
		t.Fatalf("a reader running during an uncontended fence was disturbed: %v", err)
	}
	for k := range 3 {
		if took := fenceFast(t, inst); took > 250*time.Millisecond {
			t.Errorf("fence %d of a fenced server took %s", k+2, took)
		}
	}
	var marker int
	if err := idle.QueryRowContext(context.Background(), "SELECT @marker").Scan(&marker); err != nil || marker != 1 {
		t.Fatalf("an idle session did not survive the fences: %d, %v", marker, err)
	}
	assertFenced(t, s)
}

// TestFenceHungServerTimesOut: against a server that answers nothing,
// Fence returns ErrTimeout at its deadline, not later.
func TestFenceHungServerTimesOut(t *testing.T) {
	s, inst, _ := fenceTarget(t)
	s.Freeze(t)
	start := time.Now()
	err := inst.Fence(ctxT(t, fenceBudget))
	took := time.Since(start)
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, mysqlctl.ErrTimeout) || !errors.Is(err, mysqlctl.ErrUnreachable) {
		t.Fatalf("Fence on a hung server: %v, want ErrTimeout and ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), s.Addr()) || !strings.Contains(err.Error(), "fencing") {
		t.Errorf("error %q does not say what was being done where", err)
	}
	if took > fenceBudget+300*time.Millisecond {
		t.Fatalf("Fence returned %s after a %s deadline", took-fenceBudget, fenceBudget)
	}
}

// semiSyncStuck builds a primary and a semi-sync replica whose receiver is
// stopped, so a commit on the primary waits a minute for an acknowledgement.
func semiSyncStuck(t *testing.T) (primary *mysqltest.Server, inst *mysqlctl.Instance) {
	t.Helper()
	servers := mysqltest.Start(t, 2)
	ctx := ctxT(t, 30*time.Second)
	inst, replica := connect(t, servers[0]), connect(t, servers[1])
	if err := inst.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicateFrom(ctx, sourceOf(servers[0])); err != nil {
		t.Fatal(err)
	}
	mustExec(t, servers[0].RootDB(t), "CREATE TABLE app.t (id INT PRIMARY KEY, v INT NOT NULL)")
	if err := inst.SetSemiSyncSource(ctx, true, time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	if err := replica.SetSemiSyncReplica(ctx, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the replica acknowledging", func() bool {
		st, err := inst.Status(ctx)
		return err == nil && st.SemiSync.SourceClients == 1 && st.SemiSync.SourceActive
	})
	if err := replica.StopReplicationIO(ctx); err != nil {
		t.Fatal(err)
	}
	return servers[0], inst
}

func waitForSemiSyncWait(t *testing.T, s *mysqltest.Server) {
	t.Helper()
	root := s.RootDB(t)
	waitFor(t, 10*time.Second, "a commit waiting for an acknowledgement", func() bool {
		var name, n string
		err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(&name, &n)
		return err == nil && n != "0"
	})
}

// TestFenceReleasesSemiSyncWait: a commit parked waiting for a replica's
// acknowledgement holds the commit lock the fence needs.
func TestFenceReleasesSemiSyncWait(t *testing.T) {
	// MariaDB ends the wait when the session is killed, and its client is
	// not told it committed.
	t.Run("killed client", func(t *testing.T) {
		s, inst := semiSyncStuck(t)
		insert := execAsync(session(t, s.DB(t, mysqltest.AppUser, mysqltest.AppPassword)), "INSERT INTO app.t VALUES (1, 1)")
		waitForSemiSyncWait(t, s)

		fenceFast(t, inst)
		assertFenced(t, s)
		err := mustFail(t, insert, "the INSERT waiting for semi-sync", 5*time.Second)
		t.Logf("the INSERT's client got: %v", err)
		var rows int
		s.RootDB(t).QueryRow("SELECT COUNT(*) FROM app.t").Scan(&rows)
		t.Logf("rows on the fenced primary: %d (a released commit stays local: errant on rejoin)", rows)
	})
	// A waiter that KILL does not release, as every waiter on MySQL: here a
	// session of a user the agent spares. Fence switches source semi-sync
	// off, which releases it.
	t.Run("waiter KILL does not release", func(t *testing.T) {
		s, _ := semiSyncStuck(t)
		inst, err := mysqlctl.Connect(ctxT(t, 10*time.Second), mysqlctl.Config{
			Addr: s.Addr(), User: mysqltest.AgentUser, PasswordFile: s.PasswordFile(t, mysqltest.AgentPassword),
			ReplicationUsers: []string{mysqltest.ReplUser, "root"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		insert := execAsync(session(t, s.RootDB(t)), "INSERT INTO app.t VALUES (1, 1)")
		waitForSemiSyncWait(t, s)

		fenceFast(t, inst)
		assertFenced(t, s)
		select {
		case err := <-insert:
			if err != nil {
				t.Fatalf("the spared session's INSERT: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the INSERT still waits for an acknowledgement after the fence")
		}
		st, err := inst.Status(ctxT(t, 5*time.Second))
		if err != nil || st.SemiSync.SourceEnabled {
			t.Fatalf("source semi-sync after the fence: %+v, %v; want switched off", st.SemiSync, err)
		}
	})
}

// TestFenceErrorsSayWhat: a cancelled context is a clean stop, not a
// timeout; a server that is gone is ErrDown.
func TestFenceErrorsSayWhat(t *testing.T) {
	s, inst, _ := fenceTarget(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := inst.Fence(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, mysqlctl.ErrTimeout) {
		t.Fatalf("cancelled fence: %v, want context.Canceled and no ErrTimeout", err)
	}
	s.Kill()
	err := inst.Fence(ctxT(t, 5*time.Second))
	if !errors.Is(err, mysqlctl.ErrDown) || !errors.Is(err, mysqlctl.ErrUnreachable) || !strings.Contains(err.Error(), "fencing on "+s.Addr()) {
		t.Fatalf("fence of a stopped server: %v, want ErrDown naming the operation and address", err)
	}
}
