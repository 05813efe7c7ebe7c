package dcs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mysqlha/mysqlha/testenv/readmetest"
)

// TestREADMESettings keeps the cluster settings table (docs/reference.md) equal to
// the settings agentctl set-config knows, with their defaults
// (-update-readme rewrites it).
func TestREADMESettings(t *testing.T) {
	var b strings.Builder
	b.WriteString("| setting | default | meaning |\n|---|---|---|\n")
	for _, s := range DefaultConfig().Settings() {
		fmt.Fprintf(&b, "| `%s` | `%v` | %s |\n", s.Key, s.Value, strings.ReplaceAll(s.Help, "|", `\|`))
	}
	readmetest.SectionIn(t, "docs/reference.md", "cluster-settings", b.String())
}
