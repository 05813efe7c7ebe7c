package deploy

import (
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/mysqlha/mysqlha/dcs"
)

// The PromQL check of the alert rules and the dashboard. It is a lexer with
// a little context, not Prometheus' parser (see
// TestPromQLCheckCatchesMistakes for why): it checks that brackets and
// strings close, that ranges and offsets are durations, that functions are
// PromQL functions, and, the point of it, that every metric is one the
// agent registers and every label one it (or the scrape) attaches.

var (
	promDuration = regexp.MustCompile(`^(0|([0-9]+(ms|s|m|h|d|w|y))+)$`)
	// Grafana's range variables, allowed in dashboards only.
	grafanaRanges = []string{"$__rate_interval", "$__range", "$__interval"}
	promFunctions = []string{
		"sum", "max", "min", "avg", "count", "topk", "bottomk", "quantile", "group",
		"rate", "irate", "increase", "delta", "changes", "resets", "histogram_quantile",
		"absent", "absent_over_time", "max_over_time", "min_over_time", "avg_over_time", "sum_over_time",
		"count_over_time", "last_over_time", "clamp_min", "clamp_max", "label_replace", "vector", "scalar", "time",
	}
	promGrouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	promKeywords = []string{"and", "or", "unless", "bool", "offset"}
	// What Prometheus scrapes besides the agent's own series.
	otherMetrics = []string{"up"}
)

type promToken struct {
	kind byte // i identifier, s string, n number or duration, v variable ($x), p punctuation, o operator
	text string
}

// errorer is the part of testing.TB the check reports to.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

func lexPromQL(expr string) ([]promToken, string) {
	var toks []promToken
	r := []rune(expr)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(r) && r[j] != c {
				if r[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(r) {
				return nil, "unterminated string"
			}
			toks = append(toks, promToken{'s', string(r[i+1 : j])})
			i = j + 1
		case unicode.IsLetter(c) || c == '_' || c == ':':
			j := i
			for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_' || r[j] == ':') {
				j++
			}
			toks = append(toks, promToken{'i', string(r[i:j])})
			i = j
		case unicode.IsDigit(c) || (c == '.' && i+1 < len(r) && unicode.IsDigit(r[i+1])):
			j := i
			for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '.') {
				j++
			}
			toks = append(toks, promToken{'n', string(r[i:j])})
			i = j
		case c == '$':
			j := i + 1
			if j < len(r) && r[j] == '{' {
				for j < len(r) && r[j] != '}' {
					j++
				}
				j++
			} else {
				for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_') {
					j++
				}
			}
			toks = append(toks, promToken{'v', string(r[i:min(j, len(r))])})
			i = j
		case strings.ContainsRune("(){}[],", c):
			toks = append(toks, promToken{'p', string(c)})
			i++
		case strings.ContainsRune("=!<>+-*/%^~", c):
			j := i + 1
			for j < len(r) && strings.ContainsRune("=~", r[j]) {
				j++
			}
			toks = append(toks, promToken{'o', string(r[i:j])})
			i = j
		default:
			return nil, "unexpected character " + string(c)
		}
	}
	return toks, ""
}

// checkPromQL reports to t what is wrong with expr (what names it in
// messages) and returns the series names it uses. grafana allows Grafana's
// range variables.
func checkPromQL(t errorer, what, expr string, series map[string]agentMetric, grafana bool) []string {
	t.Helper()
	toks, lexErr := lexPromQL(expr)
	if lexErr != "" {
		t.Errorf("%s: %q: %s", what, expr, lexErr)
		return nil
	}
	var (
		used      []string
		labelsIn  = map[string]bool{} // labels of the metrics used
		grouped   []string
		stack     []string // open brackets; "(g" is a grouping list
		current   string   // the metric whose {matchers} follow
		roleNames = []string{dcs.RolePrimary.String(), dcs.RoleReplica.String(), "none"}
	)
	for _, l := range targetLabels {
		labelsIn[l] = true
	}
	top := func() string {
		if len(stack) == 0 {
			return ""
		}
		return stack[len(stack)-1]
	}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		next := promToken{}
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tk.kind == 'p' && (tk.text == "(" || tk.text == "{" || tk.text == "["):
			open := tk.text
			if open == "(" && i > 0 && toks[i-1].kind == 'i' && slices.Contains(promGrouping, toks[i-1].text) {
				open = "(g"
			}
			if open == "[" {
				// A range: one duration, then ].
				if i+2 >= len(toks) || toks[i+2].text != "]" {
					t.Errorf("%s: %q: a range is one duration in [...]", what, expr)
					return used
				}
				d := toks[i+1]
				ok := (d.kind == 'n' && promDuration.MatchString(d.text)) || (grafana && d.kind == 'v' && slices.Contains(grafanaRanges, d.text))
				if !ok {
					t.Errorf("%s: %q: range [%s] is not a duration", what, expr, d.text)
				}
				i += 2
				continue
			}
			stack = append(stack, open)
		case tk.kind == 'p' && (tk.text == ")" || tk.text == "}" || tk.text == "]"):
			want := map[string]string{")": "(", "}": "{", "]": "["}[tk.text]
			if len(stack) == 0 || !strings.HasPrefix(top(), want) {
				t.Errorf("%s: %q: unbalanced %s", what, expr, tk.text)
				return used
			}
			stack = stack[:len(stack)-1]
		case tk.kind == 'i' && top() == "{":
			// A matcher: label op "value".
			if i+2 >= len(toks) || toks[i+1].kind != 'o' || toks[i+2].kind != 's' {
				t.Errorf("%s: %q: bad matcher at %s", what, expr, tk.text)
				return used
			}
			if m, ok := series[current]; ok && !slices.Contains(m.labels, tk.text) && !slices.Contains(targetLabels, tk.text) {
				t.Errorf("%s: %q: %s has no label %s (it has %v and the scrape's %v)", what, expr, current, tk.text, m.labels, targetLabels)
			}
			if tk.text == "role" && toks[i+1].text == "=" && !slices.Contains(roleNames, toks[i+2].text) {
				t.Errorf("%s: %q: role %q is not one of %v", what, expr, toks[i+2].text, roleNames)
			}
			i += 2
		case tk.kind == 'i' && top() == "(g":
			grouped = append(grouped, tk.text)
		case tk.kind == 'i' && slices.Contains(promGrouping, tk.text):
		case tk.kind == 'i' && slices.Contains(promKeywords, tk.text):
			if tk.text == "offset" && (next.kind != 'n' || !promDuration.MatchString(next.text)) {
				t.Errorf("%s: %q: offset %s is not a duration", what, expr, next.text)
			}
		case tk.kind == 'i' && (next.text == "(" || (next.kind == 'i' && (next.text == "by" || next.text == "without"))):
			if !slices.Contains(promFunctions, tk.text) {
				t.Errorf("%s: %q: %s is not a PromQL function", what, expr, tk.text)
			}
		case tk.kind == 'i':
			current = tk.text
			m, ok := series[tk.text]
			switch {
			case ok:
				used = append(used, tk.text)
				for _, l := range m.labels {
					labelsIn[l] = true
				}
			case slices.Contains(otherMetrics, tk.text):
			default:
				t.Errorf("%s: %q: %s is not a metric the agent registers (agent.NewMetrics)", what, expr, tk.text)
			}
		case tk.kind == 'v':
			t.Errorf("%s: %q: variable %s outside a range", what, expr, tk.text)
		}
	}
	if len(stack) != 0 {
		t.Errorf("%s: %q: unclosed %v", what, expr, stack)
	}
	for _, l := range grouped {
		if !labelsIn[l] {
			t.Errorf("%s: %q: grouping label %s is on none of the series used", what, expr, l)
		}
	}
	return used
}
