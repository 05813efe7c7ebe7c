package readmetest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestREADMEContents keeps the README's contents equal to its headings
// (## and ###), each linked by GitHub's anchor (-update-readme rewrites it).
func TestREADMEContents(t *testing.T) {
	b, err := os.ReadFile(readme(t))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	// Headings inside fenced blocks are not headings.
	text = regexp.MustCompile("(?s)\n```.*?\n```").ReplaceAllString(text, "")
	_, after, ok := strings.Cut(text, "<!-- contents:end -->")
	if !ok {
		t.Fatal("README has no contents section")
	}
	var sb strings.Builder
	for _, m := range regexp.MustCompile(`(?m)^(##|###) (.+)$`).FindAllStringSubmatch(after, -1) {
		indent := ""
		if m[1] == "###" {
			indent = "  "
		}
		fmt.Fprintf(&sb, "%s- [%s](#%s)\n", indent, strings.ReplaceAll(m[2], "`", ""), anchor(m[2]))
	}
	Section(t, "contents", sb.String())
}

// anchor is GitHub's anchor of a heading: lower case, punctuation but
// hyphens dropped, spaces made hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"The agent (`mysqlha-agent`)":                                   "the-agent-mysqlha-agent",
		"Running it: mysqld settings, users, troubleshooting, upgrades": "running-it-mysqld-settings-users-troubleshooting-upgrades",
		"Lossless mode (`semi_sync: strict`)":                           "lossless-mode-semi_sync-strict",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}
