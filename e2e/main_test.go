package e2e

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/internal/localproc"
)

var (
	flagLogDir = flag.String("e2e.logdir", "",
		"keep every agent's log under this directory (one sub-directory per test) instead of a temporary one")
	flagTrials = flag.Int("e2e.trials", 20, "failover trials per failover benchmark")
	flagStrict = flag.Bool("e2e.strict", true,
		"fail on the known agent bugs that some checks reproduce, instead of logging them")
	flagIdle = flag.Duration("e2e.idle", time.Minute, "how long BenchmarkIdleAgent watches an idle cluster")
)

// The agent binary is built once per test process, into binDir, on first use:
// a -short run or a run that selects no scenario builds nothing.
var (
	binDir    string
	buildOnce sync.Once
	agentBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Scenarios kill servers under open pools; the driver would log every
	// broken connection it then closes.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mysqlha-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binDir = dir
	defer os.RemoveAll(dir)
	code := m.Run()
	stopSharedKube()
	// Every scenario stops what it started in its cleanups; anything still
	// running now is a harness bug and would disturb the next test run.
	if leaked := leakedProcesses(); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: processes left behind:\n  %s\n", strings.Join(leaked, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// buildAgent compiles cmd/agent once per test process.
func buildAgent(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		// go test puts its own GOROOT/bin first in the test binary's PATH.
		out := filepath.Join(binDir, "mysqlha-agent")
		cmd := exec.Command("go", "build", "-o", out, "github.com/mysqlha/mysqlha/cmd/agent")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build cmd/agent: %v\n%s", err, b)
			return
		}
		agentBin = out
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return agentBin
}

// leakedProcesses lists live processes that are children of this test
// process or run the agent binary built by it.
func leakedProcesses() []string {
	self := os.Getpid()
	var out []string
	for _, p := range localproc.Scan(func(p localproc.Proc) bool {
		return p.PPid == self || (binDir != "" && strings.Contains(p.Cmdline, binDir))
	}) {
		out = append(out, p.String())
	}
	return out
}

// knownBug reports a failed check that reproduces a reported, not yet fixed
// agent bug (see KNOWN_BUGS in the e2e report): a test error with
// -e2e.strict, a log line otherwise, so the suite stays green while the fix
// is pending but the reproduction keeps running and is visible.
func knownBug(tb testing.TB, id, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf("KNOWN BUG %s reproduced: ", id) + fmt.Sprintf(format, args...)
	if *flagStrict {
		tb.Error(msg)
		return
	}
	tb.Log(msg)
}
