// Command mysqlha-copy copies the agent's binaries (mysqlha-agent and
// agentctl, beside it in the agent image) into a directory, for an init
// container. The agent then runs in the database server's own image, so
// that agentctl reinit finds mariabackup and mbstream of exactly the
// server's version: a backup tool older or newer than the server may
// misread its redo log.
//
//	mysqlha-copy DIR
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// binaries are copied from the directory of this executable.
var binaries = []string{"mysqlha-agent", "agentctl"}

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || os.Args[1][0] == '-' {
		fmt.Fprintln(os.Stderr, "usage: mysqlha-copy DIR   (copies mysqlha-agent and agentctl into DIR, e.g. a volume shared with the agent container)")
		os.Exit(2)
	}
	self, err := os.Executable()
	if err == nil {
		err = copyAll(filepath.Dir(self), os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mysqlha-copy:", err)
		os.Exit(1)
	}
}

func copyAll(from, to string) error {
	if fi, err := os.Stat(to); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: mount a volume there (%v)", to, err)
	}
	for _, name := range binaries {
		if err := copyExecutable(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
			return err
		}
	}
	return nil
}

// copyExecutable writes a temporary file and renames it over dst: a
// container restarted mid-copy never runs half a binary.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name()) // no-op once renamed
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := out.Chmod(0o555); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(out.Name(), dst)
}
