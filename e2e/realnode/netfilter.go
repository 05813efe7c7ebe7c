package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// iptRule is a rule of iptables-save: its chain and its text after "-A ".
type iptRule struct{ chain, text string }

// target returns the chain a rule jumps or goes to, if any.
func (r iptRule) target() string {
	f := strings.Fields(r.text)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

// nodeChains picks, from one table, the chains to delete and the rules to
// delete from the chains that stay. KUBE-* chains are the node's: one
// kubelet and one kube-proxy run per machine (the machine lock). A rule
// naming the CNI network is the node's (portmap and bridge comment their
// rules with it); a CNI-* chain is deleted when nothing but the node's
// rules and jumps to deleted chains is in it, so another CNI user's
// chains stay (an empty shared one, CNI-HOSTPORT-*, goes: portmap makes it
// again when needed).
func nodeChains(chains []string, rules []iptRule) (del []string, delRules []iptRule) {
	deleted := map[string]bool{}
	for _, c := range chains {
		if strings.HasPrefix(c, "KUBE-") {
			deleted[c] = true
		}
	}
	ours := func(r iptRule) bool { return strings.Contains(r.text, networkName) || deleted[r.target()] }
	for changed := true; changed; {
		changed = false
		for _, c := range chains {
			if deleted[c] || !strings.HasPrefix(c, "CNI-") {
				continue
			}
			all := true
			for _, r := range rules {
				if r.chain == c && !ours(r) {
					all = false
					break
				}
			}
			if all {
				deleted[c], changed = true, true
			}
		}
	}
	for _, c := range chains {
		if deleted[c] {
			del = append(del, c)
		}
	}
	for _, r := range rules {
		if !deleted[r.chain] && ours(r) {
			delRules = append(delRules, r)
		}
	}
	return del, delRules
}

// removeChains deletes, for cmd (iptables or ip6tables), the node's chains
// and rules (nodeChains): the rules first, then the chains are flushed and
// deleted. It is one iptables-restore --noflush per table, built from
// iptables-save's own lines, so rules are matched exactly as written.
func removeChains(ctx context.Context, cmd string) error {
	saved, err := run(ctx, cmd+"-save")
	if err != nil {
		return err
	}
	var script strings.Builder
	var table string
	var chains []string
	var rules []iptRule
	flush := func() {
		del, delRules := nodeChains(chains, rules)
		if len(del) == 0 && len(delRules) == 0 {
			return
		}
		fmt.Fprintf(&script, "*%s\n", table)
		for _, r := range delRules {
			fmt.Fprintf(&script, "-D %s\n", r.text)
		}
		for _, c := range del {
			fmt.Fprintf(&script, "-F %s\n", c)
		}
		for _, c := range del {
			fmt.Fprintf(&script, "-X %s\n", c)
		}
		script.WriteString("COMMIT\n")
	}
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, chains, rules = strings.TrimPrefix(line, "*"), nil, nil
		case strings.HasPrefix(line, ":"):
			if name := strings.Fields(line[1:]); len(name) > 0 {
				chains = append(chains, name[0])
			}
		case strings.HasPrefix(line, "-A "):
			text := strings.TrimPrefix(line, "-A ")
			rules = append(rules, iptRule{chain: strings.Fields(text)[0], text: text})
		case line == "COMMIT":
			flush()
		}
	}
	if script.Len() == 0 {
		return nil
	}
	bin, err := lookPath(cmd + "-restore")
	if err != nil {
		return err
	}
	c := execCommand(ctx, bin, "--noflush")
	c.Stdin = strings.NewReader(script.String())
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s\ninput:\n%s", cmd, err, bytes.TrimSpace(out), script.String())
	}
	return nil
}

// nftTables lists the nftables tables ("ip filter"), or nil without nft.
func nftTables(ctx context.Context) []string {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil
	}
	tables := []string{} // not nil: nft runs
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// removeNewNftTables deletes the nftables tables that did not exist before
// the node started and are now empty of rules: iptables-nft creates the
// tables of the chains kube-proxy and the kubelet add, and removing the
// chains leaves them behind. A table holding any rule is left alone.
func removeNewNftTables(ctx context.Context, before []string) error {
	if before == nil {
		return nil // no nft, or no record of what was there
	}
	had := map[string]bool{}
	for _, t := range before {
		had[t] = true
	}
	var errs []error
	for _, t := range nftTables(ctx) {
		if had[t] {
			continue
		}
		f := strings.Fields(t)
		out, err := run(ctx, "nft", "list", "table", f[0], f[1])
		if err != nil || !nftTableEmpty(out) {
			continue
		}
		if _, err := run(ctx, "nft", "delete", "table", f[0], f[1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nftTableEmpty reports whether `nft list table` shows only base chains
// with an accept policy and no rule, sets or maps.
func nftTableEmpty(listing string) bool {
	for _, line := range strings.Split(listing, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "", l == "}", strings.HasPrefix(l, "table "), strings.HasPrefix(l, "chain "):
		case strings.HasPrefix(l, "type ") && strings.HasSuffix(l, "policy accept;"):
		default:
			return false
		}
	}
	return true
}
