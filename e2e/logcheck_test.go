package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// duplicateLogKeys lists the top-level keys that occur more than once in
// one JSON log record (encoding/json keeps the last silently, and log
// pipelines differ in which they keep). Non-JSON lines have none.
func duplicateLogKeys(line string) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen, dups := map[string]bool{}, []string(nil)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return dups
		}
		key, _ := tok.(string)
		if seen[key] {
			dups = append(dups, key)
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return dups
		}
	}
	return dups
}

// checkLogKeys fails the test for every agent log record that repeats a
// key: one key, one meaning (a peer is "peer", never a second "member").
func (c *Cluster) checkLogKeys() {
	for _, m := range c.Members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			if dups := duplicateLogKeys(line); len(dups) > 0 {
				c.tb.Errorf("%s's agent log line %d repeats %v: %s", m.Name, i+1, dups, line)
				return
			}
		}
	}
}

func TestDuplicateLogKeys(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{`{"msg":"x","member":"db1","peer":"db2"}`, nil},
		{`{"msg":"x","member":"db1","nested":{"member":"db2"},"member":"db1"}`, []string{"member"}},
		{`=== e2e marker`, nil},
		{``, nil},
	} {
		if got := duplicateLogKeys(c.line); !slices.Equal(got, c.want) {
			t.Errorf("duplicateLogKeys(%s) = %v, want %v", c.line, got, c.want)
		}
	}
}
