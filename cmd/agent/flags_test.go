package main

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mysqlha/mysqlha/internal/version"
)

// A mistyped or malformed flag is a short usage error (exit code 2) that
// names the flag and points at --help, never the whole flag list.
func TestBadFlagsAreShortUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--clustr=demo"}, "unknown flag: --clustr"},
		{[]string{"--ttl=five"}, `invalid argument "five" for "--ttl"`},
		{[]string{"--nofailover=maybe"}, `"--nofailover"`},
		{[]string{"--cluster"}, "flag needs an argument: --cluster"},
		{[]string{"--cluster=demo", "extra"}, `unexpected arguments ["extra"]`},
	} {
		var out bytes.Buffer
		err := run(c.args, &out)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--help") {
			t.Errorf("%q: %v, want a usage error containing %q and pointing at --help", c.args, err, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%q printed %d bytes (the usage?); a bad flag needs one line:\n%s", c.args, out.Len(), out.String())
		}
	}
}

func TestVersionAndHelpPrintToStdout(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "mysqlha-agent "+version.Get()+"\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
	out.Reset()
	if err := run([]string{"--help"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: mysqlha-agent [flags]", "--ttl duration", "--etcd-cacert", "--version"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}

// Every environment variable the agent reads is named in the reference's
// agent section (docs/reference.md): the flags it stands in for say
// "(env NAME)".
func TestEveryEnvironmentVariableIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var name string
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			name = fn.Name
		case *ast.SelectorExpr:
			name = fn.Sel.Name
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING && (name == "env" || name == "Getenv") {
			v, _ := strconv.Unquote(lit.Value)
			read[v] = true
		}
		return true
	})
	if len(read) < 5 {
		t.Fatalf("found only %v: the search is broken", read)
	}
	ref, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)## The agent \\(`mysqlha-agent`\\).*?(\n## |\\z)").Find(ref)
	if section == nil {
		t.Fatal("docs/reference.md has no section \"## The agent (`mysqlha-agent`)\"")
	}
	for v := range read {
		if !bytes.Contains(section, []byte("`"+v+"`")) && !bytes.Contains(section, []byte("env "+v)) {
			t.Errorf("the agent reads $%s, and the agent section of docs/reference.md does not name it", v)
		}
	}
}

// A role change hook that cannot run stops the start, naming it: a typo
// found at 3 a.m. when the first failover's hook never ran is too late.
func TestRoleHookThatCannotRunStopsTheStart(t *testing.T) {
	base := []string{"--cluster=c", "--name=db1", "--dcs=etcd", "--etcd-endpoints=http://127.0.0.1:1",
		"--mysql-local-addr=127.0.0.1:1", "--listen=127.0.0.1:0", "--log-level=error", "--api-insecure",
		"--mysql-password-file=" + writeFile(t, "agent-password", "pw")}
	missing := filepath.Join(t.TempDir(), "on-role-change.sh")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--on-role-change=hook.sh"}, "absolute path"},
		{[]string{"--on-role-change=" + missing}, missing},
		{[]string{"--on-role-change=/bin/true", "--on-role-change-timeout=0s"}, "--on-role-change-timeout"},
	} {
		if err := run(append(base, c.args...), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// --primary-service without what routing needs stops the start, naming
// what is missing, rather than a primary that never routes itself.
func TestPrimaryServiceNeedsItsSettings(t *testing.T) {
	base := []string{"--cluster=c", "--name=db1", "--mysql-local-addr=127.0.0.1:1", "--listen=127.0.0.1:0", "--log-level=error",
		"--api-insecure", "--mysql-password-file=" + writeFile(t, "agent-password", "pw"), "--primary-service=db-primary"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dcs=etcd", "--etcd-endpoints=http://127.0.0.1:1", "--pod-ip=198.18.0.1"}, "needs --dcs=kubernetes"},
		{[]string{"--dcs=kubernetes", "--label-pods=false", "--pod-ip=198.18.0.1"}, "needs --label-pods"},
		{[]string{"--dcs=kubernetes", "--pod-ip="}, `--pod-ip "" is not one (set env POD_IP from status.podIP)`},
		{[]string{"--dcs=kubernetes", "--pod-ip=db-0"}, `--pod-ip "db-0" is not one`},
	} {
		if err := run(append(base, c.args...), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
