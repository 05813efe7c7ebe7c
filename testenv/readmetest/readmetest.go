// Package readmetest keeps generated sections of the repository's README
// and docs/ equal to what the code defines (flags, metrics, settings), so
// that the documentation cannot drift. Only tests import it.
package readmetest

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update-readme", false, "rewrite the generated sections of the README and docs/ instead of failing")

// Section checks that the README section between "<!-- name:begin -->" and
// "<!-- name:end -->" is want; with -update-readme it rewrites it.
func Section(t *testing.T, name, want string) {
	t.Helper()
	SectionIn(t, "README.md", name, want)
}

// SectionIn is Section for file, a path from the module root (such as
// docs/reference.md).
func SectionIn(t *testing.T, file, name, want string) {
	t.Helper()
	root := filepath.Dir(readme(t))
	path := filepath.Join(root, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	head, rest, ok1 := strings.Cut(string(b), begin)
	got, tail, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q ... %q section", path, strings.TrimSpace(begin), end)
	}
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(head+begin+want+end+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the %s section of %s", name, path)
		return
	}
	t.Fatalf("the %s section of %s is out of date; run `go test -run '%s' ./%s -update-readme` to rewrite it.\n%s",
		name, path, t.Name(), relDir(root), lineDiff(got, want))
}

// readme is README.md at the module root, found upwards from the package
// directory in which go test runs.
func readme(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "README.md")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// relDir is the test's package directory relative to the module root.
func relDir(root string) string {
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(root, wd)
	if err != nil {
		return "..."
	}
	return rel
}

// lineDiff lists the lines only in got (-) and only in want (+).
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
