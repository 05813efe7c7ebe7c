package testenv_test

import (
	"os/exec"
	"strings"
	"testing"
)

// shipped are the binaries deploy/Dockerfile and `make build` produce. The
// demo (cmd/demo) is not among them: it runs the test environment by hand.
var shipped = []string{
	"cmd/agent",
	"cmd/agentctl",
	"cmd/kubectl-mysqlha",
	"cmd/kubectl_complete-mysqlha",
	"cmd/mysqlha-copy",
}

// TestShippedBinariesLinkNoTestenv keeps the line between product and test
// environment where the paths draw it: no shipped binary depends on a
// package under testenv/.
func TestShippedBinariesLinkNoTestenv(t *testing.T) {
	const module = "github.com/mysqlha/mysqlha/"
	for _, cmd := range shipped {
		out, err := exec.Command("go", "list", "-deps", module+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v: %s", cmd, err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, module+"testenv/") || pkg == module+"testenv" {
				t.Errorf("%s depends on %s, a test-environment package", cmd, pkg)
			}
		}
	}
}
