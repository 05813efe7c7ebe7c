package version

import "testing"

func TestLinkTimeVersionWins(t *testing.T) {
	if got := Get(); got == "" {
		t.Fatal("Get() is empty without a link-time version")
	}
	old := Version
	defer func() { Version = old }()
	Version = "v9.8.7"
	if got := Get(); got != "v9.8.7" {
		t.Fatalf("Get() = %q, want the link-time v9.8.7", got)
	}
}
