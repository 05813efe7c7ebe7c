package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyAll(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	for _, name := range binaries {
		if err := os.WriteFile(filepath.Join(from, name), []byte("binary "+name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A stale copy from the pod's previous start is replaced.
	if err := os.WriteFile(filepath.Join(to, "agentctl"), []byte("old"), 0o555); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := copyAll(from, to); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(to)
	if len(entries) != len(binaries) {
		t.Errorf("left %d entries, want %d (no temporary files)", len(entries), len(binaries))
	}
	for _, name := range binaries {
		path := filepath.Join(to, name)
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "binary "+name {
			t.Errorf("%s: %q, %v", name, b, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o555 {
			t.Errorf("%s: mode %v, want r-xr-xr-x", name, fi.Mode())
		}
	}
}

func TestCopyAllRefuses(t *testing.T) {
	from := t.TempDir()
	if err := copyAll(from, filepath.Join(from, "missing")); err == nil || !strings.Contains(err.Error(), "mount a volume") {
		t.Errorf("missing target: %v", err)
	}
	if err := copyAll(from, t.TempDir()); err == nil || !strings.Contains(err.Error(), "mysqlha-agent") {
		t.Errorf("missing binary: %v", err)
	}
}
