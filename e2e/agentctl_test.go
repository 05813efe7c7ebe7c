package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/localproc"
)

// agentctl is driven as an operator would: the real binary, built once per
// test process next to the agent (buildAgentctl), with the DCS flags of the
// cluster.

// CtlResult is one agentctl run.
type CtlResult struct {
	Args           []string
	Code           int
	Stdout, Stderr string
	Started, Ended time.Time
}

func (r CtlResult) Took() time.Duration { return r.Ended.Sub(r.Started) }

func (r CtlResult) String() string {
	return fmt.Sprintf("agentctl %s\n  exit %d after %v\n  stdout: %s\n  stderr: %s", strings.Join(r.Args, " "), r.Code,
		r.Took().Round(time.Millisecond), indent(r.Stdout), indent(r.Stderr))
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "(empty)"
	}
	return strings.ReplaceAll(s, "\n", "\n    ")
}

// ctlTimeout bounds one agentctl run; the longest --wait in the scenarios
// is well below it.
const ctlTimeout = 90 * time.Second

// runAgentctl runs agentctl with exactly args and fails the test if it
// does not finish within ctlTimeout.
func runAgentctl(tb testing.TB, args ...string) CtlResult {
	tb.Helper()
	r, finished := runAgentctlWithin(tb, ctlTimeout, args...)
	if !finished {
		tb.Fatalf("agentctl did not finish within %v\n%s", ctlTimeout, r)
	}
	return r
}

// runAgentctlWithin runs agentctl with exactly args, in its own process
// group, with an environment stripped of the variables that would select a
// DCS behind the flags' back. After limit it kills agentctl and reports
// finished == false. It may be called from any goroutine.
func runAgentctlWithin(tb testing.TB, limit time.Duration, args ...string) (r CtlResult, finished bool) {
	tb.Helper()
	bin := buildAgentctl(tb)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader("")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MYSQLHA_") || k == "KUBECONFIG" || k == "POD_NAMESPACE" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	r = CtlResult{Args: args, Started: time.Now()}
	err := localproc.Run(cmd) // the deadline kills agentctl's whole group
	r.Ended = time.Now()
	r.Stdout, r.Stderr = stdout.String(), stderr.String()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.Code = -1
		return r, false
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	default:
		// Errorf, not Fatalf: callers may run agentctl in goroutines.
		tb.Errorf("running agentctl %s: %v", strings.Join(args, " "), err)
		r.Code = -1
	}
	return r, true
}

// ctlArgs are agentctl's global flags for this cluster.
func (c *Cluster) ctlArgs() []string {
	if c.Kube != nil {
		return append(c.Kube.ctlArgs(), "--cluster="+c.Name)
	}
	return []string{"--dcs=etcd", "--etcd-endpoints=" + c.Etcd.Endpoints()[0], "--cluster=" + c.Name}
}

// Ctl runs agentctl against this cluster: its global flags, then args.
func (c *Cluster) Ctl(args ...string) CtlResult {
	c.tb.Helper()
	return runAgentctl(c.tb, append(c.ctlArgs(), args...)...)
}

// MustCtl is Ctl that fails the test unless agentctl exits 0.
func (c *Cluster) MustCtl(args ...string) CtlResult {
	c.tb.Helper()
	r := c.Ctl(args...)
	if r.Code != 0 {
		c.tb.Fatalf("%s\ncluster:\n%s", r, c.describe())
	}
	return r
}

// expectExit checks r's exit code and that stderr carries agentctl's
// message with every fragment in want (case-insensitive).
func expectExit(tb testing.TB, r CtlResult, code int, want ...string) {
	tb.Helper()
	if r.Code != code {
		tb.Errorf("want exit code %d, got:\n%s", code, r)
		return
	}
	msg := strings.ToLower(r.Stderr)
	if code != 0 && !strings.HasPrefix(msg, "agentctl: ") && !strings.Contains(msg, "\nagentctl: ") {
		tb.Errorf("exit %d without an \"agentctl: ...\" message on stderr:\n%s", code, r)
	}
	for _, w := range want {
		if !strings.Contains(msg, strings.ToLower(w)) {
			tb.Errorf("stderr lacks %q:\n%s", w, r)
		}
	}
}

// CtlStatus is `agentctl status -o json` (the fields the scenarios check).
type CtlStatus struct {
	Cluster    string `json:"cluster"`
	Leader     string `json:"leader"`
	Paused     bool   `json:"paused"`
	Switchover *struct {
		From, To string
	} `json:"pending_switchover"`
	Members []struct {
		Name  string `json:"name"`
		Role  string `json:"role"`
		State string `json:"state"`
		Tags  string `json:"tags"`
	} `json:"members"`
	Problems []string `json:"problems"`
}

// CtlStatus runs `agentctl status -o json` and decodes it.
func (c *Cluster) CtlStatus() CtlStatus {
	c.tb.Helper()
	r := c.MustCtl("status", "-o", "json")
	var st CtlStatus
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		c.tb.Fatalf("agentctl status -o json is not the documented JSON: %v\n%s", err, r)
	}
	return st
}

// member returns the row of name; ok false when absent.
func (s CtlStatus) member(name string) (role, state, tags string, ok bool) {
	for _, m := range s.Members {
		if m.Name == name {
			return m.Role, m.State, m.Tags, true
		}
	}
	return "", "", "", false
}
