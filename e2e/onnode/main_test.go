package onnode

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/e2e/images"
	"github.com/mysqlha/mysqlha/e2e/realnode"
)

// One node, one set of images and one deployment serve every test of the
// package: bringing three MariaDB pods up is the slow part. deployed checks
// the cluster before each test and repairs it after (health_test.go).
var (
	// One trial in make test keeps it inside CI's budget; make e2e runs
	// 3 and make bench-failover 4, for figures and for rarer faults.
	flagTrials = flag.Int("onnode.trials", 1, "trials of each fault scenario")
	flagReport = flag.String("onnode.report", "", "also append each scenario's report to this file (make bench-failover)")
	flagLong   = flag.Bool("onnode.long", false, "also run the scenarios whose fault lasts minutes (make e2e, make bench-failover)")
)

var (
	setupOnce sync.Once
	shared    *cluster
	setupErr  error
	node      *realnode.Node
	nodeDir   string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// No test may lean on another's order (health_test.go): they run
	// shuffled unless -test.shuffle is given; go test prints the seed that
	// replays an order.
	shuffleGiven := false
	flag.Visit(func(f *flag.Flag) { shuffleGiven = shuffleGiven || f.Name == "test.shuffle" })
	if !shuffleGiven {
		_ = flag.Set("test.shuffle", "on")
	}
	// The monitor's socket connections die with every fenced or restarted
	// server; the driver would log each one.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	code := m.Run()
	if node != nil {
		if err := node.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "onnode: tearing the node down:", err)
			code = 1
		}
	}
	if nodeDir != "" {
		os.RemoveAll(nodeDir)
	}
	os.Exit(code)
}

// deployed returns the shared cluster, healthy and caught up, bringing the
// node, the images and the deployment up on first use. A cluster the last
// test left unhealthy is recreated; when t ends, the cluster is handed
// back: recreated if t spoiled it or left it unhealthy.
func deployed(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("onnode: runs a real Kubernetes node with MariaDB pods; skipped with -short")
	}
	setupOnce.Do(func() {
		// Stays the error when setUp ends the test (t.Fatal) part-way.
		setupErr = fmt.Errorf("the set-up failed in %s", t.Name())
		shared, setupErr = setUp(t)
	})
	if setupErr != nil {
		t.Fatalf("setting up the node and the deployment: %v", setupErr)
	}
	if shared.broken != nil {
		t.Fatal(shared.broken)
	}
	shared.t = t
	if err := shared.gate(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.handBack(t) })
	return shared
}

// logf prints the node's progress lines; the node outlives any one test.
func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "onnode: "+format+"\n", args...) }

func setUp(t *testing.T) (*cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	began := time.Now()
	root, err := images.RepoRoot()
	if err != nil {
		return nil, err
	}
	type built struct {
		img images.Image
		err error
		at  time.Duration
	}
	mariadb, agent := make(chan built, 1), make(chan built, 1)
	go func() { i, err := images.MariaDB(ctx); mariadb <- built{i, err, time.Since(began)} }()
	go func() { i, err := images.Agent(ctx, root); agent <- built{i, err, time.Since(began)} }()

	if nodeDir, err = os.MkdirTemp("", "mysqlha-onnode-"); err != nil {
		return nil, err
	}
	if node, err = realnode.Launch(ctx, filepath.Join(nodeDir, "node"), realnode.WithLogf(logf)); err != nil {
		return nil, err
	}
	nodeUp := time.Since(began)
	m, a := <-mariadb, <-agent
	if m.err != nil {
		return nil, fmt.Errorf("mariadb image: %w", m.err)
	}
	if a.err != nil {
		return nil, fmt.Errorf("agent image: %w", a.err)
	}
	for _, img := range []images.Image{m.img, a.img} {
		if err := node.ImportImage(ctx, img.Archive); err != nil {
			return nil, err
		}
	}
	imported := time.Since(began)
	c, err := deploy(ctx, t, node, root, m.img.Ref, a.img.Ref)
	if err != nil {
		return nil, err
	}
	c.t = t
	c.waitHealthy(5 * time.Minute)
	if err := c.setTestConfig(); err != nil {
		return nil, err
	}
	t.Logf("TIMING from nothing to 3 Ready pods: %s (node Ready %s, mariadb image %s, agent image %s, images imported %s)",
		time.Since(began).Round(time.Millisecond), nodeUp.Round(time.Millisecond), m.at.Round(time.Millisecond),
		a.at.Round(time.Millisecond), imported.Round(time.Millisecond))
	return c, nil
}
