package deploy

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The alert rules are run by Prometheus' own tool: promtool checks them
// (syntax, templates) and evaluates them on the series of
// monitoring/prometheusrule.test.yaml. make deps puts Debian's promtool in
// bin/ (make promtool); $PROMTOOL overrides.

const (
	ruleTests = "monitoring/prometheusrule.test.yaml"
	runbook   = "../docs/runbook.md"
	// runbookURL is where an alert's runbook_url points, before the anchor
	// of its section (GitHub's: the heading in lower case).
	runbookURL = "https://github.com/mysqlha/mysqlha/blob/main/docs/runbook.md#"
)

func promtool(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("PROMTOOL"), "../bin/promtool"}
	if p, err := exec.LookPath("promtool"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); p != "" && err == nil && st.Mode()&0o111 != 0 {
			abs, err := filepath.Abs(p) // promtool runs in another directory
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	if testing.Short() {
		t.Skip("promtool not found (make promtool)")
	}
	t.Fatal("promtool not found at $PROMTOOL, bin/promtool or in PATH: run `make promtool` (it extracts it from Debian's prometheus package into bin/)")
	return ""
}

// writeRules writes the PrometheusRule's groups as a Prometheus rule file
// in dir, as the Operator hands them to Prometheus, after edit (which may
// be nil) has changed them; withAnnotations false drops the annotations,
// which promtool's unit tests would otherwise have to repeat verbatim.
func writeRules(t *testing.T, dir string, withAnnotations bool, edit func(rule map[string]any)) string {
	t.Helper()
	u := customObject(t, kustomizeBuild(t, monitoringDir), "PrometheusRule")
	spec := u.Object["spec"].(map[string]any)
	for _, g := range spec["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			if !withAnnotations {
				delete(rule, "annotations")
			}
			if edit != nil {
				edit(rule)
			}
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPromtool runs promtool with args in dir and returns its output and
// whether it succeeded; it fails t if promtool could not run at all.
func runPromtool(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("promtool %v: %v", args, err)
	}
	return string(out), err == nil
}

// ruleTestDir is a directory holding the rules (annotations left out,
// edited by edit) and a copy of the unit tests that name them.
func ruleTestDir(t *testing.T, edit func(rule map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	writeRules(t, dir, false, edit)
	tests, err := os.ReadFile(ruleTests)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAlertRulesPassPromtool(t *testing.T) {
	dir := t.TempDir()
	writeRules(t, dir, true, nil)
	if out, ok := runPromtool(t, dir, "check", "rules", "rules.yaml"); !ok {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	out, ok := runPromtool(t, ruleTestDir(t, nil), "test", "rules", "tests.yaml")
	if !ok {
		t.Fatalf("promtool test rules %s:\n%s", ruleTests, out)
	}
	t.Logf("promtool test rules %s:\n%s", ruleTests, out)
}

// The unit tests can fail: with a threshold loosened, or a "for" dropped,
// promtool reports the alert that fires where it must not.
func TestAlertRuleTestsCatchAWrongRule(t *testing.T) {
	for name, edit := range map[string]func(map[string]any){
		"two writable counted from one": func(r map[string]any) {
			if r["alert"] == "MySQLHAMultipleWritable" {
				r["expr"] = strings.Replace(r["expr"].(string), "> 1", "> 0", 1)
			}
		},
		"no for on the hand-over's overlap": func(r map[string]any) {
			if r["alert"] == "MySQLHAMultipleWritable" {
				delete(r, "for")
			}
		},
		"lag over a bound of 0 (no limit)": func(r map[string]any) {
			if r["alert"] == "MySQLHAReplicationLag" {
				r["expr"] = "mysqlha_replication_lag_seconds > mysqlha_maximum_lag_on_failover_seconds"
			}
		},
	} {
		out, ok := runPromtool(t, ruleTestDir(t, edit), "test", "rules", "tests.yaml")
		if ok {
			t.Errorf("%s: promtool test rules passed:\n%s", name, out)
		} else if !strings.Contains(out, "FAILED") {
			t.Errorf("%s: promtool failed without a failed test:\n%s", name, out)
		} else {
			t.Logf("%s: promtool test rules says:\n%s", name, out)
		}
	}
}

// Every alert is tested both ways: a case where it fires and one where
// it must not.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	raw, err := os.ReadFile(ruleTests)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("%s: %v", ruleTests, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, g := range file.Tests {
		for _, c := range g.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				silent[c.Alertname] = true
			}
		}
	}
	for _, r := range rulesOf(t, kustomizeBuild(t, monitoringDir)) {
		if !fires[r.Alert] {
			t.Errorf("%s: no test in %s where it fires", r.Alert, ruleTests)
		}
		if !silent[r.Alert] {
			t.Errorf("%s: no test in %s where it must stay silent", r.Alert, ruleTests)
		}
	}
}

// Every alert links to its section of docs/runbook.md, and every section
// is an alert's.
func TestEveryAlertHasARunbook(t *testing.T) {
	raw, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^## (MySQLHA\w+)$`).FindAllStringSubmatch(string(raw), -1) {
		sections = append(sections, m[1])
	}
	var alerts []string
	for _, r := range rulesOf(t, kustomizeBuild(t, monitoringDir)) {
		alerts = append(alerts, r.Alert)
		if want := runbookURL + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !slices.Contains(sections, r.Alert) {
			t.Errorf("%s: no section \"## %s\" in %s", r.Alert, r.Alert, runbook)
		}
	}
	for _, s := range sections {
		if !slices.Contains(alerts, s) {
			t.Errorf("%s has a section %q that no alert links to", runbook, s)
		}
	}
}
