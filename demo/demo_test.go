package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/kubetest"
	"github.com/mysqlha/mysqlha/testenv/localproc"
	"github.com/mysqlha/mysqlha/testenv/syncbuf"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildBinaries compiles the agent and agentctl from this checkout once per
// test process, so the tests never run stale binaries from bin/.
func buildBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// go test puts its own GOROOT/bin first in PATH.
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "mysqlha-demo-bin-"); buildErr != nil {
			return
		}
		for out, pkg := range map[string]string{
			"mysqlha-agent": "github.com/mysqlha/mysqlha/cmd/agent",
			"agentctl":      "github.com/mysqlha/mysqlha/cmd/agentctl",
		} {
			if b, err := exec.Command(goBin, "build", "-o", filepath.Join(binDir, out), pkg).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// TestDemoCI runs the demo's non-interactive mode end to end, as `make
// demo-ci` does: a real embedded etcd, three real MariaDB servers and three
// agent processes. It checks the narrative (one primary and two replicas,
// a new primary after the drill, the old one rejoining) as well as Run's
// own checks, and that nothing is left running or on disk.
func TestDemoCI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real MariaDB servers, etcd and agents; skipped with -short")
	}
	text, _ := runCI(t, Config{})
	if strings.Contains(text, "Lease") {
		t.Errorf("the etcd demo talks about Leases")
	}
}

// TestDemoCIKubernetes is TestDemoCI with --k8s: the same cluster on a real
// kube-apiserver, where the Lease, the pod labels and the primary Service's
// endpoints must all follow the primary.
func TestDemoCIKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver, real MariaDB servers, etcd and agents; skipped with -short")
	}
	kubeBin, err := kubetest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(kubeBin, "kube-apiserver")); err != nil {
		t.Skipf("no kube-apiserver in %s (make kube-bin builds it)", kubeBin)
	}
	text, boot := runCI(t, Config{Backend: BackendKubernetes, KubeBinDir: kubeBin})
	for _, want := range []string{
		"Lease " + kubeNamespace + "/demo-test-leader: holderIdentity=" + boot,
		"Service demo-test-primary endpoints: ",
		"with the Lease, the pod labels and Service demo-test-primary's endpoints all moved to it",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// runCI runs the demo in CI mode with cfg's backend, checks what both
// backends print, and returns the output and the bootstrap primary.
func runCI(t *testing.T, cfg Config) (string, string) {
	t.Helper()
	bin := buildBinaries(t)
	// Short: the servers' Unix sockets live under it (108-byte limit).
	dir, err := os.MkdirTemp("", "demo-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	out := &syncbuf.Buffer{}
	began := time.Now()
	cfg.Dir, cfg.BinDir, cfg.CI, cfg.Out, cfg.Cluster = dir, bin, true, out, "demo-test"
	err = Run(ctx, cfg)
	t.Logf("demo output (%v):\n%s", time.Since(began).Round(100*time.Millisecond), out)
	if err != nil {
		t.Fatalf("demo --ci: %v", err)
	}

	text := out.String()
	boot := regexp.MustCompile(`(db\d) is primary; (db\d) and (db\d) replicate from it`).FindStringSubmatch(text)
	if boot == nil {
		t.Fatalf("no bootstrap line with one primary and two replicas")
	}
	drill := regexp.MustCompile(`drill: (db\d) took the lock [\d.]+s after the kill and accepted a write after [\d.]+s`).FindStringSubmatch(text)
	if drill == nil {
		t.Fatalf("no drill result line")
	}
	if drill[1] == boot[1] {
		t.Fatalf("the drill's new primary %s is the killed primary", drill[1])
	}
	for _, want := range []string{
		boot[1] + " replicates from " + drill[1] + " and has the row written after the failover",
		"demo checks passed",
		"checking that no process the demo started is left ... none left",
		"removing " + dir + " ... removed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("work dir %s still exists (%v)", dir, err)
	}
	if left := localproc.Scan(localproc.Under(dir)); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	return text, boot[1]
}

// TestClaimDir checks the work dir rules: a live demo's dir is refused, a
// dead one's is taken over, a foreign non-empty dir is never touched.
func TestClaimDir(t *testing.T) {
	root := t.TempDir()

	foreign := filepath.Join(root, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "precious"), nil, 0o644)
	if err := claimDir(foreign); err == nil {
		t.Errorf("claimDir took a foreign non-empty dir")
	}
	if _, err := os.Stat(filepath.Join(foreign, "precious")); err != nil {
		t.Errorf("foreign file gone: %v", err)
	}

	live := filepath.Join(root, "live")
	os.MkdirAll(live, 0o755)
	os.WriteFile(filepath.Join(live, pidFileName), []byte("1\n"), 0o644) // init is alive
	if err := claimDir(live); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("claimDir of a live demo's dir: %v", err)
	}

	dead := filepath.Join(root, "dead")
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dead, "db1"), 0o755)
	os.WriteFile(filepath.Join(dead, pidFileName), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	if err := claimDir(dead); err != nil {
		t.Fatalf("claimDir of a dead demo's dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dead, "db1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftovers of the dead demo not removed: %v", err)
	}
	if pid, err := readPid(filepath.Join(dead, pidFileName)); err != nil || pid != os.Getpid() {
		t.Errorf("pid file %d, %v; want %d", pid, err, os.Getpid())
	}
}
