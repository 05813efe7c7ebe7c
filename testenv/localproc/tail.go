package localproc

import (
	"bufio"
	"os"
	"strings"
)

// Tail returns the last n lines of the file at path, e.g. a process's log
// to print when a run fails; the error in parentheses when it cannot be
// read. Lines up to 4 MiB long are read whole.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		// Trim now and then, not on every line: memory stays bounded by
		// about 4n lines without copying on each.
		if len(lines) > 4*n {
			lines = append([]string(nil), lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
