package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// agentctl runs the real agentctl binary and prints the command and its
// output.
func (d *demo) agentctl(ctx context.Context, args ...string) error {
	full := append(append(d.be.ctlArgs(), "--cluster="+d.cfg.Cluster), args...)
	d.p.note("$ %s %s", displayPath(filepath.Join(d.cfg.BinDir, "agentctl")), strings.Join(full, " "))
	out, err := d.agentctlOutput(ctx, args...)
	d.p.block(string(out))
	return err
}

// agentctlOutput runs agentctl and returns its combined output.
func (d *demo) agentctlOutput(ctx context.Context, args ...string) ([]byte, error) {
	full := append(append(d.be.ctlArgs(), "--cluster="+d.cfg.Cluster), args...)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(d.cfg.BinDir, "agentctl"), full...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("agentctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// cleanEnv is the environment without the variables agentctl and the agent
// read as defaults, so a user's exports for another cluster do not leak in.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MYSQLHA_") || strings.HasPrefix(k, "POD_") || k == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// displayPath shows p relative to the working directory when it is below it.
func displayPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// printTry prints, once the checks are done, what the user can try on the
// running cluster and where each member listens and logs.
func (d *demo) printTry() {
	ctl := displayPath(filepath.Join(d.cfg.BinDir, "agentctl"))
	m := d.members[0]
	p := d.p
	p.plain("")
	p.plain("The cluster keeps running. In another terminal, try:")
	p.plain("")
	p.plain("  export %s", strings.Join(append(d.be.env(), "MYSQLHA_CLUSTER="+d.cfg.Cluster), " "))
	for _, l := range [][2]string{
		{ctl + " status", "members, roles, lag, GTIDs, the lock"},
		{ctl + " status --watch", "live; keep it open while you try the rest"},
		{ctl + " switchover --force --wait", "planned, lossless hand-over to the best replica"},
		{ctl + " pause", "maintenance mode: no automatic failover"},
		{ctl + " resume --wait", ""},
		{ctl + " history", "failovers and switchovers"},
		{"curl -s -H \"Authorization: Bearer $(cat " + d.secrets.apiToken + ")\" " + m.apiURL + "/status", "one agent's own view (" + m.name + ")"},
		{fmt.Sprintf("mariadb -h%s -P%d -u%s -p%s %s", m.server.Host, m.server.Port, mysqltest.AppUser, mysqltest.AppPassword,
			mysqltest.AppDatabase), m.name + " as the application user"},
	} {
		if l[1] == "" {
			p.plain("  %s", l[0])
			continue
		}
		p.plain("  %-50s # %s", l[0], l[1])
	}
	for _, l := range d.be.tryLines() {
		p.plain("%s", l)
	}
	p.plain("")
	for _, m := range d.members {
		p.plain("  %s: mysql %s, agent API %s, logs %s and %s", m.name, m.addr(), m.apiURL, m.logPath, m.server.LogPath())
	}
	p.plain("")
	p.plain("Stop: Ctrl-C here, or `make demo-stop` from another terminal (everything is removed).")
}
