package mysqldproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

func TestFindAndKillAHungServer(t *testing.T) {
	s := mysqltest.Start(t, 1)[0]
	pidFile := filepath.Join(s.Dir, "mysqld.pid")
	pid, err := Find(pidFile)
	if err != nil || pid != s.Pid() {
		t.Fatalf("Find = %d, %v; want %d", pid, err, s.Pid())
	}
	s.Freeze(t) // hung: SIGSTOP
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	killed, err := Kill(ctx, pidFile)
	if err != nil || killed != pid {
		t.Fatalf("Kill = %d, %v; want %d", killed, err, pid)
	}
	if !gone(pid) {
		t.Fatal("mysqld still runs after Kill returned")
	}
	if err := s.RootDB(t).PingContext(ctx); err == nil {
		t.Fatal("the killed mysqld still answers")
	}
	if _, err := Find(pidFile); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find after Kill: %v, want ErrNotFound", err)
	}
}

// A pid file that names a process which is no mysqld is never followed:
// nothing is killed.
func TestNotFound(t *testing.T) {
	dir := t.TempDir()
	ours := filepath.Join(dir, "mysqld.pid")
	if err := os.WriteFile(ours, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ours, filepath.Join(dir, "missing.pid")} {
		if _, err := Kill(context.Background(), path); !errors.Is(err, ErrNotFound) {
			t.Errorf("Kill(%s) = %v, want ErrNotFound", path, err)
		}
	}
	if _, err := Find("relative/mysqld.pid"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("a relative pid file: %v, want a usage error", err)
	}
}

func TestGone(t *testing.T) {
	if gone(os.Getpid()) {
		t.Error("this process reads as gone")
	}
	if !gone(1 << 30) {
		t.Error("a pid that does not exist reads as running")
	}
}
