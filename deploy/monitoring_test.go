package deploy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

const monitoringDir = "monitoring"

// targetLabels are the labels Prometheus adds to every series scraped
// through a PodMonitor.
var targetLabels = []string{"namespace", "pod", "container", "endpoint", "job", "instance"}

// promRule is one rule of a PrometheusRule, as the CRD defines it.
type promRule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type promRuleSpec struct {
	Groups []struct {
		Name  string     `json:"name"`
		Rules []promRule `json:"rules"`
	} `json:"groups"`
}

type podMonitorSpec struct {
	JobLabel            string               `json:"jobLabel"`
	Selector            metav1.LabelSelector `json:"selector"`
	PodMetricsEndpoints []struct {
		Port          string `json:"port"`
		Path          string `json:"path"`
		Interval      string `json:"interval"`
		ScrapeTimeout string `json:"scrapeTimeout"`
		Authorization struct {
			Type        string `json:"type"`
			Credentials struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"credentials"`
		} `json:"authorization"`
		Scheme    string `json:"scheme"`
		TLSConfig struct {
			CA struct {
				Secret struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"secret"`
			} `json:"ca"`
			ServerName string `json:"serverName"`
		} `json:"tlsConfig"`
	} `json:"podMetricsEndpoints"`
}

func customObject(t *testing.T, b *built, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, u := range b.custom {
		if u.GetKind() == kind {
			found = append(found, u)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one %s, got %d (%v)", b.dir, kind, len(found), b.kinds())
	}
	if found[0].GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("%s apiVersion %q", kind, found[0].GetAPIVersion())
	}
	return found[0]
}

func specOf[T any](t *testing.T, u *unstructured.Unstructured) T {
	t.Helper()
	var spec T
	raw, err := json.Marshal(u.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		t.Fatalf("%s spec: %v", u.GetKind(), err)
	}
	return spec
}

func rulesOf(t *testing.T, b *built) []promRule {
	t.Helper()
	var out []promRule
	for _, g := range specOf[promRuleSpec](t, customObject(t, b, "PrometheusRule")).Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// TestPodMonitorScrapesTheAgents: the PodMonitor selects the StatefulSet's
// pods and scrapes the agent's named port, and the job label it sets is
// the one the agent-down alerts expect.
func TestPodMonitorScrapesTheAgents(t *testing.T) {
	mon := kustomizeBuild(t, monitoringDir)
	pm := specOf[podMonitorSpec](t, customObject(t, mon, "PodMonitor"))
	sts := only[*appsv1.StatefulSet](t, kustomizeBuild(t, baseVariant.dir))
	pod := sts.Spec.Template
	sel, err := metav1.LabelSelectorAsSelector(&pm.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("PodMonitor selector %+v does not select the pods %v (%v)", pm.Selector, pod.Labels, err)
	}
	if len(pm.PodMetricsEndpoints) != 1 {
		t.Fatalf("endpoints %+v", pm.PodMetricsEndpoints)
	}
	ep := pm.PodMetricsEndpoints[0]
	if ep.Path != "/metrics" || !portIs(mustContainer(t, pod.Spec.Containers, "agent"), ep.Port, 8008) {
		t.Errorf("endpoint %+v: want the agent's port 8008 by name, path /metrics", ep)
	}
	// /metrics needs the API token the agents read (--api-token-file).
	if a := ep.Authorization; a.Type != "Bearer" || a.Credentials.Name != "mysqlha-credentials" || a.Credentials.Key != "api-token" {
		t.Errorf("endpoint authorization %+v: want Bearer from Secret mysqlha-credentials, key api-token", a)
	}
	agent := mustContainer(t, pod.Spec.Containers, "agent")
	if !slices.Contains(agent.Args, "--api-token-file=/etc/mysqlha/api-token") {
		t.Errorf("agent args %v lack --api-token-file=/etc/mysqlha/api-token", agent.Args)
	}
	// The API serves TLS: Prometheus verifies it with the CA of the
	// agents' Secret, by the name the agents check on each other.
	tc := ep.TLSConfig
	if ep.Scheme != "https" || tc.CA.Secret.Name != "mysqlha-api-tls" || tc.CA.Secret.Key != "ca.crt" ||
		!slices.Contains(agent.Args, "--api-tls-server-name="+tc.ServerName) {
		t.Errorf("endpoint scheme %q, tlsConfig %+v: want https, the CA from Secret mysqlha-api-tls key ca.crt, and the agents' server name (args %v)",
			ep.Scheme, tc, agent.Args)
	}
	job := pod.Labels[pm.JobLabel]
	if job == "" {
		t.Fatalf("jobLabel %q is not a pod label", pm.JobLabel)
	}
	exprs := map[string]string{}
	for _, r := range rulesOf(t, mon) {
		exprs[r.Alert] = r.Expr
	}
	for _, alert := range []string{"MySQLHAAgentDown", "MySQLHAAgentsAbsent"} {
		if !strings.Contains(exprs[alert], `job="`+job+`"`) {
			t.Errorf("%s %q does not select job=%q", alert, exprs[alert], job)
		}
	}
}

// TestAlertRules: the alerts the operators need exist, are labelled and
// annotated, and every expression uses metrics and labels the agent
// exposes.
func TestAlertRules(t *testing.T) {
	rules := rulesOf(t, kustomizeBuild(t, monitoringDir))
	series := agentSeries(t)
	// Each required alert and a metric its expression must use.
	required := map[string]string{
		"MySQLHAMultipleWritable":    "mysqlha_mysql_read_only",
		"MySQLHAMultiplePrimaries":   "mysqlha_role",
		"MySQLHANoWritable":          "mysqlha_mysql_read_only",
		"MySQLHANoLeader":            "mysqlha_is_leader",
		"MySQLHAMySQLDown":           "mysqlha_mysql_up",
		"MySQLHAErrantMember":        "mysqlha_errant",
		"MySQLHAMemberWithoutRole":   "mysqlha_role",
		"MySQLHANoFailoverCandidate": "mysqlha_failover_candidate",
		"MySQLHADuplicateIdentity":   "mysqlha_duplicate_identity",
		"MySQLHAReplicationBroken":   "mysqlha_replication_sql_running",
		"MySQLHAReplicationLag":      "mysqlha_maximum_lag_on_failover_seconds",
		"MySQLHASemiSyncStalled":     "mysqlha_semi_sync_stalled",
		"MySQLHAPausedTooLong":       "mysqlha_paused",
		"MySQLHAFailsafeActive":      "mysqlha_failsafe_active",
		"MySQLHADCSUnreachable":      "mysqlha_ttl_seconds",
		"MySQLHADCSErrors":           "mysqlha_dcs_errors_total",
		"MySQLHALockRenewFailures":   "mysqlha_lock_renew_failures_total",
		"MySQLHARepeatedFailovers":   "mysqlha_failovers_total",
		"MySQLHAFencing":             "mysqlha_fencing_actions_total",
		"MySQLHARebuildNeeded":       "mysqlha_rebuild_needed",
		"MySQLHARebuildTooLong":      "mysqlha_rebuilding",
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, sev)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if r.For != "" && !promDuration.MatchString(r.For) {
			t.Errorf("%s: for %q is not a duration", r.Alert, r.For)
		}
		used := checkPromQL(t, r.Alert, r.Expr, series, false)
		if m, ok := required[r.Alert]; ok && !slices.Contains(used, m) {
			t.Errorf("%s: expression %q does not use %s", r.Alert, r.Expr, m)
		}
	}
	for name := range required {
		if !seen[name] {
			t.Errorf("no alert %s", name)
		}
	}
}

// TestDashboard: the Grafana dashboard is valid JSON in a ConfigMap the
// sidecar picks up, covers the agent's main signals, and queries only
// metrics the agent exposes.
func TestDashboard(t *testing.T) {
	b := kustomizeBuild(t, monitoringDir)
	var cm *corev1.ConfigMap
	for _, o := range b.typed {
		if c, ok := o.(*corev1.ConfigMap); ok {
			cm = c
		}
	}
	if cm == nil || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("no ConfigMap labelled grafana_dashboard=1: %v", b.kinds())
	}
	file, err := os.ReadFile(filepath.Join(monitoringDir, "dashboards", "mysqlha.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["mysqlha.json"] != string(file) {
		t.Fatal("ConfigMap key mysqlha.json differs from dashboards/mysqlha.json")
	}
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int             `json:"id"`
			Type       string          `json:"type"`
			Title      string          `json:"title"`
			Datasource json.RawMessage `json:"datasource"`
			Targets    []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(file, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("dashboard without uid or title")
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, v := range []string{"datasource", "namespace", "cluster"} {
		if !slices.Contains(vars, v) {
			t.Errorf("no template variable %s (have %v)", v, vars)
		}
	}
	series := agentSeries(t)
	ids := map[int]bool{}
	used := map[string]bool{}
	var titles []string
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		titles = append(titles, strings.ToLower(p.Title))
		if len(p.Targets) == 0 || len(p.Datasource) == 0 {
			t.Errorf("panel %q has no targets or no datasource", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range checkPromQL(t, "panel "+p.Title, tg.Expr, series, true) {
				used[m] = true
			}
			if !strings.Contains(tg.Expr, `cluster=~"$cluster"`) {
				t.Errorf("panel %q: %q does not filter on $cluster", p.Title, tg.Expr)
			}
		}
	}
	for _, topic := range []string{"leader", "role", "lag", "failover", "fencing", "dcs", "loop", "renew"} {
		if !slices.ContainsFunc(titles, func(s string) bool { return strings.Contains(s, topic) }) {
			t.Errorf("no panel about %s (titles %q)", topic, titles)
		}
	}
	for _, m := range []string{"mysqlha_is_leader", "mysqlha_role", "mysqlha_replication_lag_seconds", "mysqlha_failovers_total",
		"mysqlha_fencing_actions_total", "mysqlha_dcs_errors_total", "mysqlha_loop_duration_seconds_bucket", "mysqlha_lock_renew_duration_seconds_bucket"} {
		if !used[m] {
			t.Errorf("the dashboard never queries %s", m)
		}
	}
}

// TestVendoredCRDs: the CRD files are the ones SOURCE.md names.
func TestVendoredCRDs(t *testing.T) {
	f, err := os.Open(filepath.Join(monitoringDir, "crds", "SOURCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^\| (monitoring\.coreos\.com_[a-z]+\.yaml) \| ([0-9a-f]{64}) \|$`)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(monitoringDir, "crds", m[1]))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != m[2] {
			t.Errorf("%s: sha256 %x, SOURCE.md says %s", m[1], sum, m[2])
		}
	}
	if n != 2 {
		t.Errorf("SOURCE.md lists %d files, want 2", n)
	}
}

// TestPromQLCheckCatchesMistakes: the expression check below is a small
// lexer, not Prometheus' parser (github.com/prometheus/prometheus would
// bring dozens of modules and newer versions of grpc and otel into go.mod).
// It must still catch the usual mistakes.
func TestPromQLCheckCatchesMistakes(t *testing.T) {
	series := agentSeries(t)
	for _, expr := range []string{
		`mysqlha_is_leeder == 1`,                               // unknown metric
		`rat(mysqlha_dcs_errors_total[5m])`,                    // unknown function
		`rate(mysqlha_dcs_errors_total[5 m])`,                  // bad range
		`sum by (clsuter) (mysqlha_is_leader)`,                 // unknown grouping label
		`mysqlha_role{rol="primary"}`,                          // unknown label
		`mysqlha_role{role="leader"}`,                          // unknown role
		`sum(rate(mysqlha_dcs_errors_total[5m])`,               // unbalanced
		`mysqlha_is_leader{cluster="a}`,                        // unterminated string
		`rate(mysqlha_dcs_errors_total[$__rate_interval]) > 1`, // Grafana variable in a rule
		`mysqlha_fencing_actions_total offset 10x`,             // bad offset
	} {
		ft := &fakeT{}
		checkPromQL(ft, "case", expr, series, false)
		if !ft.failed {
			t.Errorf("%q passed the check", expr)
		}
		t.Logf("%s", strings.Join(ft.msgs, "; "))
	}
}

// fakeT records failures of a check run on purpose.
type fakeT struct {
	failed bool
	msgs   []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
