package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/testenv/readmetest"
)

// TestREADMEFlags keeps the flag reference (docs/reference.md) equal to the agent's
// flags (-update-readme rewrites it).
func TestREADMEFlags(t *testing.T) {
	// Defaults from the downward API render as the variable they come from.
	t.Setenv("POD_IP", "$POD_IP")
	for _, v := range []string{"POD_NAME", "POD_NAMESPACE", "MYSQLHA_CLUSTER", "MYSQLHA_DCS", "MYSQLHA_ETCD_ENDPOINTS",
		"KUBECONFIG", "MYSQLHA_ADVERTISE_MYSQL_ADDR", "MYSQLHA_ADVERTISE_API_URL"} {
		t.Setenv(v, "")
	}
	b := dcs.DefaultConfig()
	readmetest.SectionIn(t, "docs/reference.md", "agent-flags", flagTable(defineFlags(&options{}, &b)))
}

func flagTable(fs *pflag.FlagSet) string {
	var sb strings.Builder
	sb.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		def := f.DefValue
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&sb, "| `--%s` | %s | %s |\n", f.Name, def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	return sb.String()
}
