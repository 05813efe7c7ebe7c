package localproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The leak check finds a process whose command line names a path under the
// dir, and only under that dir.
func TestScanUnderFindsAProcessStartedUnderTheDir(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	bin := filepath.Join(dir, "sleeper")
	if err := os.Symlink(sleep, bin); err != nil {
		t.Fatal(err)
	}
	p, err := Start(exec.Command(bin, "300"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()

	pids := func(ps []Proc) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.Pid)
		}
		return out
	}
	found := Scan(Under(dir))
	if !slices.Equal(pids(found), []int{p.Pid()}) {
		t.Fatalf("Scan(Under(%s)) = %v, want pid %d", dir, found, p.Pid())
	}
	if f := found[0]; f.PPid != os.Getpid() || f.Pgid != p.Pid() || f.Cmdline != bin+" 300" {
		t.Errorf("found %+v, want ppid %d, pgid %d, cmdline %q", f, os.Getpid(), p.Pid(), bin+" 300")
	}
	if got := Scan(Under(other)); len(got) != 0 {
		t.Errorf("Scan(Under(%s)) = %v, want none", other, got)
	}
	// Under is about paths below dir, not names that merely start alike.
	if got := Scan(Under(dir[:len(dir)-1])); len(got) != 0 {
		t.Errorf("Scan(Under(%s)) = %v, want none", dir[:len(dir)-1], got)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := Scan(Under(dir)); len(got) != 0 {
		t.Errorf("after Kill, Scan(Under(dir)) = %v", got)
	}
}

// Alive is false for a zombie, which kill -0 alone would call alive.
func TestAliveZombie(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Not waited for: a zombie once it has exited.
	for range 1000 {
		if p, ok := read(pid); ok && p.State == "Z" {
			break
		}
		exec.Command("true").Run() // let time pass without a sleep
	}
	if p, _ := read(pid); p.State != "Z" {
		t.Fatalf("pid %d state %q, want a zombie", pid, p.State)
	}
	if Alive(pid) {
		t.Errorf("Alive(%d) for a zombie", pid)
	}
	cmd.Wait()
	if Alive(pid) {
		t.Errorf("Alive(%d) after it was reaped", pid)
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want Proc
		ok   bool
	}{
		{"42 (sleep) S 1 42 42 0 -1", Proc{State: "S", PPid: 1, Pgid: 42}, true},
		// The command name may hold spaces and parentheses.
		{"7 (a) b (c) Z 3 5 5 0", Proc{State: "Z", PPid: 3, Pgid: 5}, true},
		{"7 (truncated", Proc{}, false},
		{"7 (x) S 1", Proc{}, false},
	} {
		got, ok := parseStat([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}
