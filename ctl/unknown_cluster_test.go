package ctl

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/dcs/memory"
)

// A CLI on cluster "demoo", which nobody created, beside "demo": every
// command that names it fails with ExitUnknownCluster, lists what the DCS
// holds, and writes nothing.
func typoCLI(t *testing.T) (*CLI, *bytes.Buffer) {
	t.Helper()
	srv := memory.NewServer("demoo")
	s, err := srv.NewStore(memory.Options{Member: "agentctl"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	out := &bytes.Buffer{}
	c := &CLI{Store: s, Out: out, Err: out, In: strings.NewReader("y\n"), Poll: 10 * time.Millisecond,
		Clusters: func(context.Context) ([]string, error) { return []string{"demo", "orders"}, nil }}
	return c, out
}

func TestCommandsOnAClusterNobodyCreatedFail(t *testing.T) {
	ctx := context.Background()
	commands := map[string]func(c *CLI) error{
		"status":      func(c *CLI) error { return c.Status(ctx, Table, false) },
		"history":     func(c *CLI) error { return c.History(ctx, Table) },
		"show-config": func(c *CLI) error { return c.ShowConfig(ctx, Table) },
		"pause":       func(c *CLI) error { return c.SetPaused(ctx, true, false, time.Second) },
		"resume":      func(c *CLI) error { return c.SetPaused(ctx, false, false, time.Second) },
		"set-config":  func(c *CLI) error { return c.SetConfig(ctx, []string{"ttl=10s"}, false) },
		"edit-config": func(c *CLI) error {
			c.Editor = func(string) error { return nil }
			return c.EditConfig(ctx, true, false)
		},
		"switchover": func(c *CLI) error { return c.Switchover(ctx, SwitchoverOptions{Force: true}) },
		"failover":   func(c *CLI) error { return c.Failover(ctx, FailoverOptions{To: "db1", Force: true}) },
		"describe":   func(c *CLI) error { return c.Describe(ctx, Table, "db1") },
		"reinit":     func(c *CLI) error { return c.Reinit(ctx, ReinitOptions{Member: "db1", Force: true}) },
		"remove":     func(c *CLI) error { return c.Remove(ctx, "db1", time.Second) },
	}
	for name, run := range commands {
		t.Run(name, func(t *testing.T) {
			c, _ := typoCLI(t)
			err := run(c)
			exitCode(t, err, ExitUnknownCluster)
			for _, want := range []string{`no cluster "demoo"`, "clusters found: demo, orders"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%q lacks %q", err, want)
				}
			}
			if cl, _ := c.read(ctx); cl.Exists() {
				t.Fatalf("%s wrote to the cluster nobody created: %+v", name, cl)
			}
		})
	}
}

// set-config says how to go on, and --create stores the config of a
// cluster not bootstrapped yet, saying so.
func TestSetConfigCreatesOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	c, out := typoCLI(t)
	err := c.SetConfig(ctx, []string{"ttl=10s"}, false)
	if !strings.Contains(err.Error(), "give --create") {
		t.Fatalf("%v: no way forward named", err)
	}
	if err := c.SetConfig(ctx, []string{"ttl=10s"}, true); err != nil {
		t.Fatal(err)
	}
	cl, _ := c.read(ctx)
	if !cl.Exists() || cl.Config.TTL != 10*time.Second || !strings.Contains(out.String(), `Creating the config of cluster "demoo"`) {
		t.Fatalf("exists %v, ttl %s, output %q", cl.Exists(), cl.Config.TTL, out)
	}
	// Now it exists: the other commands act on it.
	if err := c.Status(ctx, Table, false); err != nil {
		t.Fatal(err)
	}
}

// A DCS whose clusters cannot be listed still gets the failure, with why
// the names are missing.
func TestUnknownClusterWhenTheListFails(t *testing.T) {
	c, _ := typoCLI(t)
	c.Clusters = func(context.Context) ([]string, error) { return nil, errors.New("leases is forbidden") }
	err := c.Status(context.Background(), Table, false)
	exitCode(t, err, ExitUnknownCluster)
	if !strings.Contains(err.Error(), "listing the clusters it holds failed: leases is forbidden") {
		t.Fatal(err)
	}
}
