package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/testenv/mysqltest"
)

// secrets are the passwords the agents read from files; none may appear in
// anything the product writes or serves.
var secrets = []string{mysqltest.AgentPassword, mysqltest.ReplPassword, mysqltest.AppPassword}

func leaked(what, text string) []string {
	var out []string
	for _, s := range secrets {
		if strings.Contains(text, s) {
			out = append(out, what+" contains the password "+s)
		}
	}
	return out
}

// TestCredentialsNeverLeak: through a bootstrap, a failover (with the errors
// a dead peer causes), a rejoin and a wrong password, the agents' logs,
// GET /status and /cluster of every member, the Kubernetes Events and
// `mysqlha-agent --help` never contain a password.
func TestCredentialsNeverLeak(t *testing.T) {
	c := NewCluster(t, Options{Kubernetes: true})
	old := c.Bootstrap()
	hardFailover(t, c, old)
	old.RestartMySQL()
	old.StartAgent()
	c.WaitHealthy(60 * time.Second)

	// An agent with a wrong password: its connection errors must not echo it.
	wrong := c.Others(old)[0]
	wrong.StopAgent()
	pwFile := wrong.Server.PasswordFile(t, mysqltest.AppPassword) // a secret, but the wrong one
	wrong.args = replaceFlag(wrong.args, "--mysql-password-file=", pwFile)
	wrong.StartAgent()
	// The path under test must run: the agent logs the refused login.
	waitFor(t, 10*c.Timing.LoopWait, wrong.Name+"'s agent to log the refused login", func() (bool, string) {
		return strings.Contains(strings.Join(wrong.LogSince("(start #2)"), "\n"), "Access denied"), ""
	})

	var problems []string
	for _, m := range c.Members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, leaked(m.Name+"'s agent log", string(b))...)
		for _, path := range []string{"/status", "/cluster"} {
			if _, body, err := m.get(path); err == nil {
				problems = append(problems, leaked(m.Name+" GET "+path, string(body))...)
			}
		}
		evs, err := c.Kube.Events(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			problems = append(problems, leaked(m.Name+" Event "+e.Reason, e.Message)...)
		}
	}
	help, _ := exec.Command(c.bin, "--help").CombinedOutput()
	problems = append(problems, leaked("mysqlha-agent --help", string(help))...)
	if !strings.Contains(string(help), "--mysql-password-file") {
		t.Errorf("--help does not list --mysql-password-file:\n%s", help)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// replaceFlag replaces the value of the flag with prefix in args.
func replaceFlag(args []string, prefix, value string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if strings.HasPrefix(a, prefix) {
			out[i] = prefix + value
		}
	}
	return out
}
