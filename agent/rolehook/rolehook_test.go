package rolehook

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// script writes an executable shell script into a temporary directory.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a hook on path until the test ends, logging to the returned
// observer.
func start(t *testing.T, path string, timeout time.Duration) (*Hook, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	h := New(path, timeout, "demo", "db1", zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, logs
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "|"))
}

func messages(logs *observer.ObservedLogs, msg string) int { return logs.FilterMessage(msg).Len() }

func TestHookGetsRoleClusterAndMember(t *testing.T) {
	out := filepath.Join(t.TempDir(), "calls")
	h, logs := start(t, script(t, `echo "$1 $2 $3 $MYSQLHA_ROLE $MYSQLHA_CLUSTER $MYSQLHA_MEMBER" >> `+out+"\n"), 5*time.Second)
	h.Changed("primary")
	waitFor(t, "the hook's run", func() bool { return messages(logs, "role change hook ran") == 1 })
	if got := lines(t, out); len(got) != 1 || got[0] != "primary|demo|db1|primary|demo|db1" {
		t.Fatalf("hook called with %q, want ROLE CLUSTER MEMBER in arguments and environment", got)
	}
}

// Changes made while a run is in progress are coalesced into one run with
// the latest role; Changed never waits for the hook.
func TestChangesDuringARunAreCoalescedToTheLatest(t *testing.T) {
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "calls"), filepath.Join(dir, "gate")
	// The first run waits until the test opens the gate.
	h, logs := start(t, script(t, `echo "$1" >> `+out+`
while [ "$1" = primary ] && [ ! -e `+gate+` ]; do sleep 0.01; done
`), 10*time.Second)
	h.Changed("primary")
	waitFor(t, "the first run", func() bool { return len(lines(t, out)) == 1 })
	for i := 0; i < 1000; i++ { // would block, were Changed to wait for the hook
		h.Changed("none")
		h.Changed("replica")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two runs", func() bool { return messages(logs, "role change hook ran") == 2 })
	time.Sleep(100 * time.Millisecond) // a third run would show now
	if got := lines(t, out); strings.Join(got, ",") != "primary,replica" {
		t.Fatalf("hook runs %q, want primary then the latest role, replica, once", got)
	}
}

// A hook past its timeout is killed with what it started, and logged; a
// failing hook is logged with its output; the next change runs again.
func TestHookTimeoutAndFailureAreLoggedAndBounded(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	h, logs := start(t, script(t, `if [ "$1" = primary ]; then sleep 60 & echo $! > `+pidFile+`; wait; fi
echo "cannot reach the proxy" >&2; exit 3
`), 300*time.Millisecond)
	began := time.Now()
	h.Changed("primary")
	waitFor(t, "the timeout's kill", func() bool { return messages(logs, "role change hook killed: it ran past its timeout") == 1 })
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the hook ran %s with a timeout of 300ms", took)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(must(os.ReadFile(pidFile)))))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hook's child to die", func() bool { return syscall.Kill(pid, 0) != nil })

	h.Changed("replica")
	waitFor(t, "the failure", func() bool { return messages(logs, "role change hook failed") == 1 })
	e := logs.FilterMessage("role change hook failed").All()[0].ContextMap()
	if e["output"] != "cannot reach the proxy" || e["role"] != "replica" || !strings.Contains(e["error"].(string), "exit status 3") {
		t.Errorf("failure logged as %v, want the role, the exit status and the output", e)
	}
}

func TestCheckRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"hook.sh":                     "absolute path",
		filepath.Join(dir, "missing"): "no such file",
		plain:                         "not an executable file",
		dir:                           "not an executable file",
		script(t, "exit 0\n"):         "",
	} {
		err := Check(path)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Check(%q) = %v, want %q", path, err, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
