package realnode

import (
	"slices"
	"testing"
)

func TestNodeChains(t *testing.T) {
	rules := []iptRule{
		{"PREROUTING", `PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
		{"PREROUTING", `PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT`},
		{"PREROUTING", `PREROUTING -j OTHER`},
		{"KUBE-SERVICES", `KUBE-SERVICES -j KUBE-SVC-X`},
		{"CNI-HOSTPORT-DNAT", `CNI-HOSTPORT-DNAT -m comment --comment "dnat name: \"mysqlha-realnode\" id: \"abc\"" -j CNI-DN-1`},
		{"CNI-DN-1", `CNI-DN-1 -p tcp -m comment --comment "dnat name: \"mysqlha-realnode\" id: \"abc\"" -j DNAT --to-destination 198.18.10.2:80`},
		{"CNI-HOSTPORT-SNAT", `CNI-HOSTPORT-SNAT -m comment --comment "snat name: \"theirs\" id: \"def\"" -j CNI-SN-2`},
		{"CNI-SN-2", `CNI-SN-2 -m comment --comment "snat name: \"theirs\" id: \"def\"" -j MASQUERADE`},
		{"POSTROUTING", `POSTROUTING -j CNI-HOSTPORT-SNAT`},
	}
	chains := []string{"PREROUTING", "POSTROUTING", "OTHER", "KUBE-SERVICES", "KUBE-SVC-X", "CNI-HOSTPORT-DNAT", "CNI-DN-1",
		"CNI-HOSTPORT-SNAT", "CNI-SN-2", "CNI-EMPTY"}
	del, delRules := nodeChains(chains, rules)
	wantDel := []string{"KUBE-SERVICES", "KUBE-SVC-X", "CNI-HOSTPORT-DNAT", "CNI-DN-1", "CNI-EMPTY"}
	if !slices.Equal(del, wantDel) {
		t.Errorf("chains to delete = %v, want %v", del, wantDel)
	}
	var got []string
	for _, r := range delRules {
		got = append(got, r.text)
	}
	wantRules := []string{rules[0].text, rules[1].text}
	if !slices.Equal(got, wantRules) {
		t.Errorf("rules to delete = %q, want %q", got, wantRules)
	}
}

func TestNftTableEmpty(t *testing.T) {
	empty := "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n}\n"
	if !nftTableEmpty(empty) {
		t.Error("a table of empty accepting base chains is not empty")
	}
	for _, s := range []string{
		"table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority filter; policy drop;\n\t}\n}\n",
		"table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tip saddr 198.18.0.1 drop\n\t}\n}\n",
	} {
		if nftTableEmpty(s) {
			t.Errorf("table reported empty:\n%s", s)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/tmp/a\040b`); got != "/tmp/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
}
