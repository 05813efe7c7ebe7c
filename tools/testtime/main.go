// Command testtime reads `go test -json` on its standard input and prints
// what a plain `go test` run would (each package's result line, and the
// whole output of a test that failed), then where the time went: every
// package, and the slowest top-level tests. `make test` pipes through it,
// so a CI log says which package and which scenario ate the budget.
//
// It also prints every line a test logged with the marker "verdict: ",
// passing tests included: the end-to-end scenarios log their checker's
// judgement that way (acknowledged and lost writes, the bank, the
// linearizability check), so a green CI log still shows what was proven.
//
// Usage: go test -json ./... | go run ./tools/testtime [-top N]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type timing struct {
	name    string
	elapsed time.Duration
	failed  bool
	// note follows the name: for a package, the time outside its
	// top-level tests (TestMain's set-up and tear-down, building).
	note string
}

func main() {
	top := flag.Int("top", 40, "how many of the slowest tests to list")
	flag.Parse()
	failed, err := run(os.Stdin, os.Stdout, *top)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtime:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// run copies the plain output of the events in r to w, then the time
// tables; it reports whether any package or test failed.
func run(r io.Reader, w io.Writer, top int) (failed bool, err error) {
	var (
		pending  = map[string][]string{} // a running test's output, printed if it fails
		packages []timing
		tests    []timing
		inTests  = map[string]time.Duration{} // per package
		verdicts []string
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // build errors and the like come through as text
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if e.Test == "" {
				if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- PASS") && e.Output != "PASS\n" {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			pending[key] = append(pending[key], e.Output)
			if _, v, ok := strings.Cut(e.Output, verdictMarker); ok {
				verdicts = append(verdicts, fmt.Sprintf("  %s %s: %s", shortPackage(e.Package), e.Test, strings.TrimRight(v, "\n")))
			}
		case "pass", "fail", "skip":
			d := time.Duration(e.Elapsed * float64(time.Second))
			if e.Action == "fail" {
				failed = true
				if e.Test != "" {
					fmt.Fprint(w, strings.Join(pending[key], ""))
				}
			}
			delete(pending, key)
			switch {
			case e.Test == "" && e.Action == "skip": // no test files
			case e.Test == "":
				outside := (d - inTests[e.Package]).Round(100 * time.Millisecond)
				packages = append(packages, timing{name: e.Package, elapsed: d, failed: e.Action == "fail",
					note: fmt.Sprintf(" (outside its tests %s)", outside)})
			case !strings.Contains(e.Test, "/"):
				inTests[e.Package] += d
				tests = append(tests, timing{name: e.Package + " " + e.Test, elapsed: d, failed: e.Action == "fail"})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	if len(verdicts) > 0 {
		fmt.Fprintf(w, "\nthe scenarios' verdicts (%d):\n%s\n", len(verdicts), strings.Join(verdicts, "\n"))
	}
	printTable(w, "time by package", packages, len(packages))
	printTable(w, fmt.Sprintf("the %d slowest tests", min(top, len(tests))), tests, top)
	return failed, nil
}

// verdictMarker starts the part of a logged line that is a scenario's
// verdict (see the package comment).
const verdictMarker = "verdict: "

// shortPackage drops the module path: every package is in one module.
func shortPackage(p string) string {
	if i := strings.Index(p, "/mysqlha/mysqlha/"); i >= 0 {
		return p[i+len("/mysqlha/mysqlha/"):]
	}
	return p
}

func printTable(w io.Writer, title string, rows []timing, limit int) {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].elapsed > rows[j].elapsed })
	var total time.Duration
	for _, r := range rows {
		total += r.elapsed
	}
	fmt.Fprintf(w, "\n%s (sum %s):\n", title, total.Round(time.Second))
	for i, r := range rows {
		if i == limit {
			break
		}
		mark := ""
		if r.failed {
			mark = "  FAIL"
		}
		fmt.Fprintf(w, "  %8s  %s%s%s\n", r.elapsed.Round(100*time.Millisecond), r.name, r.note, mark)
	}
}
