package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/backup"
	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// The primary purged the binary logs a new, empty member needs, so
// replication alone cannot bring it up to date; agentctl reinit rebuilds it
// from a replica's mariabackup stream, and it then replicates every row.
// The test plays mysqld's supervisor: it starts the member's mysqld again
// once the agent shut it down and removed the reinit marker.
//
// The history has two writers (a switchover first), and the rebuilt member
// then leads: its binlog state must name the earlier writer too, or every
// other member would look errant to it (found on the real node).
func TestReinitEmptyMemberAfterPurge(t *testing.T) {
	c := NewCluster(t, Options{})
	first := c.WaitHealthy(60 * time.Second)
	c.EnsureTable(first)
	c.WriteAndReplicate(first, "by-the-first-primary")
	p := c.Others(first)[0]
	c.MustCtl("switchover", "--to", p.Name, "--force", "--wait")
	if got := c.WaitHealthy(60 * time.Second); got != p {
		t.Fatalf("after the switchover %s leads, want %s", got.Name, p.Name)
	}
	for i := range 200 {
		if err := p.Write(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WriteAndReplicate(p, "before-purge")
	purgeBinlogs(t, p)

	// The new member: an empty data directory in place of a replica's.
	victim := c.Others(p, first)[0]
	victim.StopAgent()
	victim.Server.Stop()
	data := filepath.Join(victim.Server.Dir, "data")
	template, err := mysqltest.PrepareTemplate()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", template, data).CombinedOutput(); err != nil {
		t.Fatalf("emptying %s: %v: %s", victim.Name, err, out)
	}
	victim.RestartMySQL()
	victim.StartAgent()
	c.WriteAndReplicate(p, "after-purge", victim)
	time.Sleep(3 * time.Second)
	if victim.HasRow("before-purge") || victim.HasRow("after-purge") {
		t.Fatalf("%s caught up from purged binary logs: the scenario tests nothing", victim.Name)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restarts := superviseMySQL(ctx, t, victim)

	start := time.Now()
	r := c.MustCtl("reinit", victim.Name, "--force", "--wait", "--wait-timeout=3m")
	t.Logf("agentctl reinit %s took %v:\n%s", victim.Name, time.Since(start).Round(time.Millisecond), r)
	cancel()
	if n := <-restarts; n != 1 {
		t.Errorf("mysqld of %s was restarted %d times, want once", victim.Name, n)
	}

	c.WaitRejoined(60*time.Second, victim, p)
	c.WriteAndReplicate(p, "after-reinit")
	want, got := rowsDigest(t, p.root), rowsDigest(t, victim.root)
	if want != got || !strings.HasPrefix(want, "205:") {
		t.Fatalf("rows on %s: %s, on the primary %s: %s", victim.Name, got, p.Name, want)
	}
	if _, err := os.Stat(filepath.Join(data, backup.MarkerFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reinit marker left behind: %v", err)
	}

	// The rebuilt member leads; both others follow it, none errant.
	c.MustCtl("switchover", "--to", victim.Name, "--force", "--wait")
	if got := c.WaitHealthy(60 * time.Second); got != victim {
		t.Fatalf("after the switchover %s leads, want %s", got.Name, victim.Name)
	}
	c.WriteAndReplicate(victim, "led-by-the-rebuilt-member")
}

// purgeBinlogs leaves the primary with only its current binary log; a purge
// skips logs the binlog checkpoint still holds, so it is retried.
func purgeBinlogs(t *testing.T, p *Member) {
	t.Helper()
	db := p.root
	if _, err := db.Exec("FLUSH BINARY LOGS"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, p.Name+" to purge its binary logs", func() (bool, string) {
		var file, doDB, ignoreDB string
		var pos int64
		if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
			return false, err.Error()
		}
		if _, err := db.Exec("PURGE BINARY LOGS TO '" + file + "'"); err != nil {
			return false, err.Error()
		}
		var n int
		rows, err := db.Query("SHOW BINARY LOGS")
		if err != nil {
			return false, err.Error()
		}
		defer rows.Close()
		for rows.Next() {
			n++
		}
		return n == 1, fmt.Sprintf("%d binary logs left", n)
	})
}

// superviseMySQL restarts m's mysqld once it exited (the agent's SHUTDOWN)
// and the reinit marker is gone; the channel yields the restart count when
// ctx ends.
func superviseMySQL(ctx context.Context, t *testing.T, m *Member) <-chan int {
	return superviseMySQLThen(ctx, t, m, nil)
}

// superviseMySQLThen is superviseMySQL that calls beforeStart, when not
// nil, each time before it starts mysqld again.
func superviseMySQLThen(ctx context.Context, t *testing.T, m *Member, beforeStart func()) <-chan int {
	res := make(chan int, 1)
	marker := filepath.Join(m.Server.Dir, "data", backup.MarkerFile)
	go func() {
		n := 0
		defer func() { res <- n }()
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			pid := m.Server.Pid()
			if pid == 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
				continue
			}
			if _, err := os.Stat(marker); err == nil {
				continue // the supervisor's wait: the agent is swapping
			}
			m.Server.Stop() // reaps the exited process's handle
			if beforeStart != nil {
				beforeStart()
			}
			if err := m.Server.Start(); err != nil {
				t.Errorf("restarting %s's mysqld: %v", m.Name, err)
				return
			}
			n++
		}
	}()
	return func() <-chan int {
		out := make(chan int, 1)
		go func() {
			<-ctx.Done()
			out <- <-res
		}()
		return out
	}()
}

func rowsDigest(t *testing.T, db *sql.DB) string {
	t.Helper()
	var s string
	if err := db.QueryRow("SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT(id, tag))), 0)) FROM app.e2e").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
