package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress prints the demo's steps, each stamped with the time since the
// demo started and ended with its own duration:
//
//	[ 9.7s] waiting for the cluster to bootstrap ... db1 is primary; db2, db3 replicate from it (4.3s)
//
// A step's line is opened when it starts, so a slow step shows what it is
// waiting for, and closed with its result.
type progress struct {
	out   io.Writer
	t0    time.Time
	begun time.Time
	open  bool
}

func newProgress(out io.Writer) *progress { return &progress{out: out, t0: time.Now()} }

func (p *progress) stamp() string {
	return fmt.Sprintf("[%5.1fs]", time.Since(p.t0).Seconds())
}

// start opens a step's line.
func (p *progress) start(format string, args ...any) {
	p.closeOpen()
	fmt.Fprintf(p.out, "%s %s ... ", p.stamp(), fmt.Sprintf(format, args...))
	p.begun, p.open = time.Now(), true
}

// done closes the step's line with its result and duration.
func (p *progress) done(format string, args ...any) time.Duration {
	d := time.Since(p.begun)
	if !p.open {
		fmt.Fprintf(p.out, "%s   ", p.stamp())
	}
	fmt.Fprintf(p.out, "%s (%s)\n", fmt.Sprintf(format, args...), seconds(d))
	p.open = false
	return d
}

// failed closes the step's line as failed.
func (p *progress) failed() { p.abort("FAILED") }

// abort closes the step's line with why it ended.
func (p *progress) abort(why string) {
	if p.open {
		fmt.Fprintf(p.out, "%s (%s)\n", why, seconds(time.Since(p.begun)))
		p.open = false
	}
}

// closeOpen ends a step line that something else is about to interrupt.
func (p *progress) closeOpen() {
	if p.open {
		fmt.Fprintln(p.out)
		p.open = false
	}
}

// note prints a stamped line of its own.
func (p *progress) note(format string, args ...any) {
	p.closeOpen()
	fmt.Fprintf(p.out, "%s %s\n", p.stamp(), fmt.Sprintf(format, args...))
}

// detail prints an indented line under the current step, which it closes.
func (p *progress) detail(format string, args ...any) {
	p.closeOpen()
	fmt.Fprintf(p.out, "         %s\n", fmt.Sprintf(format, args...))
}

// block prints text indented, e.g. a command's output.
func (p *progress) block(text string) {
	p.closeOpen()
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(p.out, "    %s\n", l)
	}
}

// plain prints lines as they are.
func (p *progress) plain(format string, args ...any) {
	p.closeOpen()
	fmt.Fprintf(p.out, format+"\n", args...)
}

// seconds formats a duration as "4.3s" (one decimal).
func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// names joins member names: "db2", "db2 and db3", "db1, db2 and db3".
func names(ms []*member) string {
	var n []string
	for _, m := range ms {
		n = append(n, m.name)
	}
	switch len(n) {
	case 0:
		return "none"
	case 1:
		return n[0]
	}
	return strings.Join(n[:len(n)-1], ", ") + " and " + n[len(n)-1]
}

// verb picks the singular or plural form for n subjects.
func verb(n int, singular, plural string) string {
	if n == 1 {
		return singular
	}
	return plural
}
