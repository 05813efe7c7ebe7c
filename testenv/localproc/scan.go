package localproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Proc is a process as /proc shows it.
type Proc struct {
	Pid, PPid, Pgid int
	// State is the state letter of /proc/<pid>/stat: R, S, D, T, Z, ...
	State string
	// Cmdline is the command line, arguments joined by spaces.
	Cmdline string
}

func (p Proc) String() string {
	return fmt.Sprintf("pid %d (ppid %d, state %s): %s", p.Pid, p.PPid, p.State, p.Cmdline)
}

// Scan lists the live processes, other than the caller, for which match
// returns true. Zombies (state Z) and dead processes (X) are left out: they
// run nothing, and a zombie orphan lingers until init reaps it.
func Scan(match func(Proc) bool) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		p, ok := read(pid)
		if ok && live(p.State) && match(p) {
			out = append(out, p)
		}
	}
	return out
}

// Under matches the processes whose command line names a path below dir
// (a --datadir, a password file, the binary itself): the ones a run whose
// files all live in dir started, even those that escaped its bookkeeping.
// dir must be absolute.
func Under(dir string) func(Proc) bool {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	return func(p Proc) bool { return strings.Contains(p.Cmdline, prefix) }
}

// Alive reports whether pid is a live process: it exists and is not a
// zombie.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	p, ok := read(pid)
	return ok && live(p.State)
}

func live(state string) bool { return state != "Z" && state != "X" }

// read reads pid's stat and command line; false when it has gone.
func read(pid int) (Proc, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Proc{}, false
	}
	p, ok := parseStat(stat)
	if !ok {
		return Proc{}, false
	}
	p.Pid = pid
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	p.Cmdline = string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))
	return p, true
}

// parseStat reads the state, parent pid and process group from
// /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", where comm may itself
// contain spaces and parentheses.
func parseStat(stat []byte) (Proc, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return Proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return Proc{}, false
	}
	return Proc{State: f[0], PPid: ppid, Pgid: pgid}, true
}
