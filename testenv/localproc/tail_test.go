package localproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	long := filepath.Join(dir, "long.log")
	os.WriteFile(long, []byte(b.String()), 0o644)
	short := filepath.Join(dir, "short.log")
	os.WriteFile(short, []byte("a\nb\n"), 0o644)
	for _, tc := range []struct {
		path string
		n    int
		want string
	}{
		{long, 3, "line 98\nline 99\nline 100"},
		{long, 1, "line 100"},
		{short, 5, "a\nb"},
		{long, 0, ""},
	} {
		if got := Tail(tc.path, tc.n); got != tc.want {
			t.Errorf("Tail(%s, %d) = %q, want %q", filepath.Base(tc.path), tc.n, got, tc.want)
		}
	}
	if got := Tail(filepath.Join(dir, "missing"), 3); !strings.HasPrefix(got, "(open ") {
		t.Errorf("Tail of a missing file = %q, want the error in parentheses", got)
	}
}
