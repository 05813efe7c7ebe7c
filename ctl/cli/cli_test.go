package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"

	"github.com/mysqlha/mysqlha/ctl"
	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/connect"
	"github.com/mysqlha/mysqlha/dcs/memory"
	"github.com/mysqlha/mysqlha/internal/version"
	"github.com/mysqlha/mysqlha/testenv/syncbuf"
)

// fixture is cluster "demo" in the in-memory DCS (db1 leads, db2 and db3
// replicate), which every run of the command tree connects to.
type fixture struct {
	t      *testing.T
	srv    *memory.Server
	stores map[string]*memory.Store
	// clock is agentctl's stores': it judges expiry and staleness.
	clock *clocktesting.FakeClock
	// opened are the settings of every connection, for the resolution tests.
	mu     sync.Mutex
	opened []connect.Settings
	ghost  *memory.Server // openGhost's
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, srv: memory.NewServer("demo"), stores: map[string]*memory.Store{},
		clock: clocktesting.NewFakeClock(time.Now())}
	ctx := context.Background()
	for _, n := range []string{"db1", "db2", "db3"} {
		s, err := f.srv.NewStore(memory.Options{Member: n})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f.stores[n] = s
		m := dcs.Member{Name: n, Role: dcs.RoleReplica, MySQLAddr: n + ":3306", GTIDExecuted: "0-1-100",
			Replication: dcs.ReplicationRunning, AgentVersion: "v1.2." + n[2:]}
		if n == "db1" {
			m.Role, m.Replication = dcs.RolePrimary, dcs.ReplicationNone
		}
		if err := s.UpdateMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.stores["db1"].AcquireLeader(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return f
}

// open is Deps.Open: a fresh agentctl store on the fixture's server, for
// cluster "demo" only, so that a test sees which cluster was asked for.
func (f *fixture) open(s connect.Settings) (*connect.Conn, error) {
	f.mu.Lock()
	f.opened = append(f.opened, s)
	f.mu.Unlock()
	if s.Cluster == ghost || s.Cluster == listingCluster {
		return f.openGhost()
	}
	if s.Cluster != "demo" {
		return nil, errors.New("no cluster " + s.Cluster)
	}
	st, err := f.srv.NewStore(memory.Options{Member: "agentctl", Clock: f.clock})
	if err != nil {
		return nil, err
	}
	return &connect.Conn{Store: st}, nil
}

// ghost is a cluster name nobody created: the DCS answers for it with an
// empty snapshot, and lists "demo" as the cluster it holds.
const ghost = "ghost"

func (f *fixture) openGhost() (*connect.Conn, error) {
	f.mu.Lock()
	if f.ghost == nil {
		f.ghost = memory.NewServer(ghost)
	}
	srv := f.ghost
	f.mu.Unlock()
	st, err := srv.NewStore(memory.Options{Member: "agentctl", Clock: f.clock})
	if err != nil {
		return nil, err
	}
	return &connect.Conn{Store: st, Clusters: func(context.Context) ([]string, error) { return []string{"demo"}, nil }}, nil
}

func (f *fixture) lastOpened() connect.Settings {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.opened) == 0 {
		f.t.Fatal("the command did not connect")
	}
	return f.opened[len(f.opened)-1]
}

// result is one run of the command tree.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

type runOpts struct {
	name  string
	stdin string
	env   map[string]string
	err   *syncbuf.Buffer
}

func (f *fixture) runWith(o runOpts, args ...string) result {
	f.t.Helper()
	if o.name == "" {
		o.name = Agentctl
	}
	if o.err == nil {
		o.err = &syncbuf.Buffer{}
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, o.name, args, Deps{In: strings.NewReader(o.stdin), Out: &out, Err: o.err,
		Getenv: func(k string) string { return o.env[k] }, Open: f.open})
	return result{stdout: out.String(), stderr: o.err.String(), code: ctl.ExitCode(err), err: err}
}

func (f *fixture) run(args ...string) result {
	f.t.Helper()
	return f.runWith(runOpts{}, args...)
}

// etcd are global flags that select a DCS without a kubeconfig; the
// fixture's Open serves the in-memory store whatever the backend.
var etcd = []string{"--dcs=etcd", "--etcd-endpoints=http://127.0.0.1:2379"}

func args(a ...[]string) []string {
	var all []string
	for _, x := range a {
		all = append(all, x...)
	}
	return all
}

func wantCode(t *testing.T, r result, code int, fragments ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d (%v), want %d\nstdout: %s\nstderr: %s", r.code, r.err, code, r.stdout, r.stderr)
	}
	for _, w := range fragments {
		if r.err == nil || !strings.Contains(r.err.Error(), w) {
			t.Errorf("error %v lacks %q", r.err, w)
		}
	}
}

func statusOf(t *testing.T, r result) ctl.StatusView {
	t.Helper()
	var v ctl.StatusView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("status -o json is not JSON: %v\n%s", err, r.stdout)
	}
	return v
}

func TestFlagsBeforeOrAfterTheCommand(t *testing.T) {
	f := newFixture(t)
	for _, a := range [][]string{
		args(etcd, []string{"--cluster=demo", "-o", "json", "status"}),
		args([]string{"status"}, etcd, []string{"--cluster", "demo", "--output=json"}),
		args([]string{"--dcs=etcd", "status", "-ojson"}, []string{"--etcd-endpoints", "http://127.0.0.1:2379", "--cluster=demo"}),
	} {
		r := f.run(a...)
		wantCode(t, r, 0)
		if v := statusOf(t, r); v.Leader != "db1" || len(v.Members) != 3 {
			t.Errorf("%v: %+v", a, v)
		}
		if s := f.lastOpened(); s.Kind != "etcd" || s.EtcdEndpoints != "http://127.0.0.1:2379" || s.Cluster != "demo" {
			t.Errorf("%v: connected with %+v", a, s)
		}
	}
}

func TestPositionalCluster(t *testing.T) {
	f := newFixture(t)
	wantCode(t, f.run(args([]string{"status", "demo", "-o", "json"}, etcd)...), 0)
	// The environment is a default the argument overrides.
	r := f.runWith(runOpts{env: map[string]string{"MYSQLHA_CLUSTER": "other"}}, args(etcd, []string{"status", "demo"})...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "Leader: db1") {
		t.Errorf("status demo:\n%s", r.stdout)
	}
	r = f.runWith(runOpts{env: map[string]string{"MYSQLHA_CLUSTER": "demo"}}, args(etcd, []string{"describe", "db2"})...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "Member:") || !strings.Contains(r.stdout, "db2") {
		t.Errorf("describe db2 with MYSQLHA_CLUSTER:\n%s", r.stdout)
	}
	wantCode(t, f.run(args(etcd, []string{"describe", "demo", "db2"})...), 0)
	wantCode(t, f.run(args(etcd, []string{"--cluster=demo", "describe", "demo", "db2"})...), 0)

	// --cluster and an argument that disagree; too many arguments.
	wantCode(t, f.run(args(etcd, []string{"--cluster=other", "status", "demo"})...), ctl.ExitUsage, "--cluster=other already names the cluster")
	wantCode(t, f.run(args(etcd, []string{"status", "demo", "extra"})...), ctl.ExitUsage, "unexpected arguments")
	wantCode(t, f.run(args(etcd, []string{"describe", "demo", "db2", "db3"})...), ctl.ExitUsage, "want MEMBER, or CLUSTER MEMBER")
	wantCode(t, f.run(args(etcd, []string{"status"})...), ctl.ExitUsage, "--cluster is required")

	r = f.run(args(etcd, []string{"switchover", "demo", "--to", "db2", "--force", "-o", "json"})...)
	wantCode(t, r, 0)
	var res ctl.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.From != "db1" || res.To != "db2" {
		t.Fatalf("switchover demo --to db2: %+v %v\n%s", res, err, r.stdout)
	}
	// set-config: the first argument is the cluster unless it is key=value.
	r = f.run(args(etcd, []string{"set-config", "demo", "ttl=12s", "loop_wait=3s"})...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "ttl: 30s -> 12s") && !strings.Contains(r.stdout, "ttl") {
		t.Errorf("set-config demo ttl=12s:\n%s", r.stdout)
	}
}

// A mistyped cluster name is an error, exit 11, naming what the DCS holds,
// and changes nothing; a config is stored for a new cluster only with
// --create.
func TestMistypedClusterFails(t *testing.T) {
	f := newFixture(t)
	for _, cmd := range [][]string{{"pause", ghost}, {"resume", ghost}, {"status", ghost}, {"history", ghost},
		{"switchover", ghost, "--force"}, {"describe", ghost, "db1"}, {"set-config", ghost, "ttl=10s"}} {
		r := f.run(args(cmd, etcd)...)
		wantCode(t, r, ctl.ExitUnknownCluster, `no cluster "ghost" in the DCS`, "clusters found: demo")
		if strings.Contains(r.stdout, "Paused") || strings.Contains(r.stdout, "Changed") {
			t.Errorf("%v claimed success:\n%s", cmd, r.stdout)
		}
	}
	wantCode(t, f.run(args([]string{"set-config", ghost, "ttl=10s"}, etcd)...), ctl.ExitUnknownCluster, "give --create")
	r := f.run(args([]string{"set-config", ghost, "--create", "ttl=10s"}, etcd)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `Creating the config of cluster "ghost"`) {
		t.Errorf("set-config --create:\n%s", r.stdout)
	}
	r = f.run(args([]string{"show-config", ghost, "-o", "json"}, etcd)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"10s"`) {
		t.Errorf("show-config after --create:\n%s", r.stdout)
	}
}

// writeKubeconfig writes a kubeconfig with contexts dev (current) and
// prod, each with its server and namespace.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://dev.example:6443"}
- name: prod
  cluster: {server: "https://prod.example:6443"}
users:
- name: operator
  user: {token: unused}
contexts:
- name: dev
  context: {cluster: dev, user: operator, namespace: dev-db}
- name: prod
  context: {cluster: prod, user: operator, namespace: prod-db}
current-context: dev
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// isolateKube keeps the machine's own kubeconfig and in-cluster config out.
func isolateKube(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

func TestKubeconfigContextsAndNamespaces(t *testing.T) {
	f := newFixture(t)
	isolateKube(t)
	kc := writeKubeconfig(t)
	cases := []struct {
		name       string
		args       []string
		kubeconfig string // $KUBECONFIG
		host, ns   string
	}{
		{"current context", []string{"--kubeconfig=" + kc}, "", "https://dev.example:6443", "dev-db"},
		{"--context", []string{"--kubeconfig", kc, "--context=prod"}, "", "https://prod.example:6443", "prod-db"},
		{"-n overrides the context's namespace", []string{"--kubeconfig=" + kc, "--context=prod", "-n", "other"}, "", "https://prod.example:6443", "other"},
		{"--namespace after the command", []string{"--kubeconfig=" + kc, "--namespace=late"}, "", "https://dev.example:6443", "late"},
		{"$KUBECONFIG list", []string{"--context=prod"}, filepath.Join(t.TempDir(), "missing") + string(os.PathListSeparator) + kc, "https://prod.example:6443", "prod-db"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			r := f.run(args([]string{"status", "demo", "-o", "json"}, tc.args)...)
			wantCode(t, r, 0)
			s := f.lastOpened()
			if s.Kind != "kubernetes" || s.RESTConfig == nil || s.RESTConfig.Host != tc.host || s.Namespace != tc.ns {
				t.Fatalf("connected to %q namespace %q (kind %s), want %q namespace %q", hostOf(s), s.Namespace, s.Kind, tc.host, tc.ns)
			}
		})
	}
	// Kubernetes without any config, and not in a pod: as unreachable as before.
	t.Setenv("KUBECONFIG", "")
	wantCode(t, f.run("status", "demo"), ctl.ExitUnreachable, "not running in a pod")
	// kubectl's --cluster would clash with ours, which names the mysqlha cluster.
	wantCode(t, f.run("--kubeconfig="+kc, "--cluster=demo", "status"), 0)
}

func hostOf(s connect.Settings) string {
	if s.RESTConfig == nil {
		return "(none)"
	}
	return s.RESTConfig.Host
}

func TestCompletion(t *testing.T) {
	f := newFixture(t)
	for shell, want := range map[string][]string{
		"bash": {"# bash completion V2 for agentctl", "__start_agentctl", "complete -o default -F __start_agentctl agentctl"},
		"zsh":  {"#compdef agentctl", "_agentctl()"},
	} {
		r := f.run("completion", shell)
		wantCode(t, r, 0)
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("completion %s lacks %q:\n%.300s", shell, w, r.stdout)
			}
		}
	}
	// The shells complete the commands, flags and all, from the tree itself.
	r := f.run("__complete", "sw")
	if !strings.Contains(r.stdout, "switchover") {
		t.Errorf("completing \"sw\": %s", r.stdout)
	}
}

func TestVersion(t *testing.T) {
	f := newFixture(t)
	r := f.run(args(etcd, []string{"version", "demo", "-o", "json"})...)
	wantCode(t, r, 0)
	var v ctl.VersionView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, r.stdout)
	}
	if v.Client != version.Get() || v.Unreachable != "" || len(v.Members) != 3 || v.Members[1] != (ctl.MemberVersion{Name: "db2", Version: "v1.2.2"}) {
		t.Fatalf("version: %+v", v)
	}
	// Without a reachable DCS it still prints its own version, and says why
	// the members' are missing.
	r = f.run(args(etcd, []string{"version", "elsewhere"})...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "Client: "+version.Get()) || !strings.Contains(r.stdout, "Members: unknown (no cluster elsewhere)") {
		t.Fatalf("version without the DCS:\n%s", r.stdout)
	}
	r = f.run(args(etcd, []string{"describe", "demo", "db3"})...)
	if !strings.Contains(r.stdout, "v1.2.3") {
		t.Errorf("describe lacks the agent version:\n%s", r.stdout)
	}
}

// decode parses JSON or YAML output into a map.
func decode(t *testing.T, format, out string) map[string]any {
	t.Helper()
	b := []byte(out)
	if format == "yaml" {
		var err error
		if b, err = yaml.YAMLToJSON(b); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, out)
		}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not %s: %v\n%s", format, err, out)
	}
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{"list": v}
}

func TestEveryCommandHonoursOutput(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			f := newFixture(t)
			sedTTL := "sed -i -e s/^ttl:.*/ttl:\\ 13s/"
			cases := []struct {
				args []string
				key  string // a key of the result
				want any
			}{
				{[]string{"status"}, "leader", "db1"},
				{[]string{"history"}, "list", nil},
				{[]string{"show-config"}, "ttl", nil},
				{[]string{"describe", "db2"}, "name", "db2"},
				{[]string{"version"}, "client", version.Get()},
				{[]string{"pause"}, "paused", true},
				{[]string{"resume"}, "paused", false},
				{[]string{"set-config", "ttl=10s", "loop_wait=3s"}, "command", "set-config"},
				{[]string{"edit-config", "--force"}, "command", "edit-config"},
				{[]string{"switchover", "--to", "db2", "--force"}, "to", "db2"},
			}
			for _, tc := range cases {
				r := f.runWith(runOpts{env: map[string]string{"VISUAL": sedTTL}}, args(etcd, []string{"--cluster=demo", "-o", format}, tc.args)...)
				wantCode(t, r, 0)
				m := decode(t, format, r.stdout)
				if got, ok := m[tc.key]; !ok || (tc.want != nil && got != tc.want) {
					t.Errorf("%v -o %s: %s = %v, want %v\n%s", tc.args, format, tc.key, got, tc.want, r.stdout)
				}
			}
			// failover needs a cluster without a healthy leader, and no
			// pending switchover.
			g := newFixture(t)
			if err := g.stores["db1"].ReleaseLeader(context.Background()); err != nil {
				t.Fatal(err)
			}
			r := g.run(args(etcd, []string{"--cluster=demo", "-o", format, "failover", "--to", "db3", "--force"})...)
			wantCode(t, r, 0)
			if m := decode(t, format, r.stdout); m["command"] != "failover" || m["to"] != "db3" {
				t.Errorf("failover -o %s: %v", format, m)
			}
			// remove: once db3's record stays unchanged for a member ttl.
			stderr := &syncbuf.Buffer{}
			done := make(chan result, 1)
			go func() {
				done <- f.runWith(runOpts{err: stderr}, args(etcd, []string{"--cluster=demo", "-o", format, "remove", "db3"})...)
			}()
			waitFor(t, func() bool { return strings.Contains(stderr.String(), "Watching its record") })
			f.clock.Step(dcs.DefaultMemberTTL)
			r = <-done
			wantCode(t, r, 0)
			if m := decode(t, format, r.stdout); m["command"] != "remove" || m["member"] != "db3" {
				t.Errorf("remove -o %s: %v", format, m)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The confirmation prompt goes to stderr, so that stdout stays the
// command's output when piped.
func TestPromptOnStderr(t *testing.T) {
	f := newFixture(t)
	r := f.runWith(runOpts{stdin: "n\n"}, args(etcd, []string{"switchover", "demo", "--to", "db2"})...)
	wantCode(t, r, ctl.ExitAborted)
	if !strings.Contains(r.stderr, "Switch over from db1 to db2? [y/N]") || strings.Contains(r.stdout, "[y/N]") || strings.Contains(r.stdout, "Plan:") {
		t.Fatalf("prompt: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = f.runWith(runOpts{stdin: "y\n"}, args(etcd, []string{"switchover", "demo", "--to", "db2"})...)
	wantCode(t, r, 0)
	if r.stdout != "Switchover requested: db1 -> db2\n" {
		t.Fatalf("stdout after yes: %q", r.stdout)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{args(etcd, []string{"--cluster=demo", "frobnicate"}), `unknown command "frobnicate"`},
		{args(etcd, []string{"--cluster=demo", "switchover", "--bogus"}), "flag provided but not defined: -bogus"},
		{args(etcd, []string{"--bogus", "status"}), "flag provided but not defined: -bogus"},
		{args(etcd, []string{"--cluster=demo", "status", "-o", "xml"}), `-o "xml": want table, wide, json or yaml`},
		{args(etcd, []string{"--timeout=soon", "status"}), `invalid value "soon" for flag --timeout`},
		{[]string{"--dcs=zookeeper", "--cluster=demo", "status"}, `--dcs "zookeeper"`},
		{args(etcd, []string{"--cluster=demo", "failover", "--force"}), "failover needs --to"},
		{args(etcd, []string{"--cluster=demo", "pause", "--to=db2"}), "flag provided but not defined: -to"},
		{args(etcd, []string{"--cluster=demo", "switchover", "--at=tomorrow"}), `--at "tomorrow": give a time (RFC 3339`},
		{args(etcd, []string{"--cluster=demo", "switchover", "--at=-5m"}), `--at "-5m"`},
		{args(etcd, []string{"--cluster=demo", "switchover", "--at=90m", "--cancel"}), "--at and --cancel do not go together"},
	}
	for _, tc := range cases {
		wantCode(t, f.run(tc.args...), ctl.ExitUsage, tc.want)
	}
	// Help is not an error, and goes to stdout.
	for _, a := range [][]string{{"--help"}, {"status", "--help"}, {"help", "status"}} {
		r := f.run(a...)
		wantCode(t, r, 0)
		if r.stderr != "" || !strings.Contains(r.stdout, "Usage: agentctl") {
			t.Errorf("%v: stdout %q, stderr %q", a, r.stdout, r.stderr)
		}
	}
	wantCode(t, f.run(args(etcd, []string{"--cluster=demo", "describe", "nosuch"})...), ctl.ExitUnknownMember)
}

// As a kubectl plugin, the usage lines name `kubectl mysqlha`.
func TestPluginName(t *testing.T) {
	f := newFixture(t)
	for _, a := range [][]string{{"--help"}, {"switchover", "--help"}} {
		r := f.runWith(runOpts{name: Plugin}, a...)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "Usage: kubectl mysqlha") || !strings.Contains(r.stdout, "  kubectl mysqlha --cluster=demo") {
			t.Errorf("%v as the plugin:\n%s", a, r.stdout)
		}
	}
}

// Shell completion offers the DCS's clusters, then the cluster's members,
// for arguments and for --to and --from; never file names.
func TestCompletionOfClustersAndMembers(t *testing.T) {
	f := newFixture(t)
	complete := func(words ...string) []string {
		t.Helper()
		r := f.run(append([]string{cobra.ShellCompRequestCmd}, args(etcd, words)...)...)
		wantCode(t, r, 0)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if last := lines[len(lines)-1]; last != ":4" { // ShellCompDirectiveNoFileComp
			t.Errorf("%q: directive %q, want :4 (no file names)", words, last)
		}
		return lines[:len(lines)-1]
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"status", ""}, "demo"},
		{[]string{"describe", ""}, "demo"},
		{[]string{"describe", "demo", ""}, "db1,db2,db3"},
		{[]string{"describe", "demo", "db"}, "db1,db2,db3"},
		{[]string{"--cluster=demo", "describe", "db2"}, "db2"},
		{[]string{"switchover", "demo", "--to", ""}, "db1,db2,db3"},
		{[]string{"--cluster=demo", "reinit", "db3", "--from", "db"}, "db1,db2,db3"},
		{[]string{"status", "demo", ""}, ""},
	} {
		if got := strings.Join(complete(c.words...), ","); got != c.want {
			t.Errorf("completing %q: %q, want %q", c.words, got, c.want)
		}
	}
}
