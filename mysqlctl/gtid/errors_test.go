package gtid

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{
			"mysql",
			&ParseError{Input: "abc:1-x", Pos: 6, Reason: "interval end is not a number", Flavor: MySQL},
			`gtid: parsing "abc:1-x" at byte 6: interval end is not a number; expected uuid:N[-M][:N[-M]...]`,
		},
		{
			"mysql from parser",
			func() error { _, err := ParseSet(u1 + ":1-x"); return err }(),
			`gtid: parsing "` + u1 + `:1-x" at byte 39: interval end is not a number; expected uuid:N[-M][:N[-M]...]`,
		},
		{
			"mariadb from parser",
			func() error { _, err := ParseMariaDBPos("0-1-5,0-2-6"); return err }(),
			`gtid: parsing "0-1-5,0-2-6" at byte 6: duplicate domain 0 (first at byte 0); expected domain-server-seq[,domain-server-seq...]`,
		},
		{
			"control characters are escaped",
			func() error { _, err := ParseSet(u1 + ":1,\n\x00"); return err }(),
			`gtid: parsing "` + u1 + `:1,\n\x00" at byte 40: malformed UUID: '\x00' is not a hex digit; expected uuid:N[-M][:N[-M]...]`,
		},
		{
			"no flavor, no hint",
			&ParseError{Input: "x", Pos: 0, Reason: "bad"},
			`gtid: parsing "x" at byte 0: bad`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestParseErrorTruncatesLongInput(t *testing.T) {
	// A realistic long gtid_executed with the error near the end.
	var parts []string
	for i := range 40 {
		parts = append(parts, fmt.Sprintf("%08x-71ca-11e1-9e33-c80aa9429562:1-%d", i, i+1))
	}
	in := strings.Join(parts, ",\n") + ",BAD"
	_, err := ParseSet(in)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
	if pe.Input != in {
		t.Error("ParseError.Input must keep the whole input")
	}
	msg := err.Error()
	if !strings.Contains(msg, `"…`) || strings.Contains(msg, parts[0]) {
		t.Errorf("message does not truncate the start: %s", msg)
	}
	if !strings.Contains(msg, `,BAD"`) {
		t.Errorf("message does not show the offending spot: %s", msg)
	}
	if len(msg) > 250 {
		t.Errorf("message is %d bytes long: %s", len(msg), msg)
	}

	// Error at the start of a long input: the tail is cut instead.
	_, err = ParseSet("X" + in)
	msg = err.Error()
	if !strings.Contains(msg, `"X`) || !strings.Contains(msg, `…" at byte 0`) {
		t.Errorf("message does not truncate the end: %s", msg)
	}
}

func TestQuoteExcerpt(t *testing.T) {
	long := strings.Repeat("a", 100) + "é" + strings.Repeat("b", 100)
	for _, pos := range []int{-5, 0, 40, 99, 100, 101, 102, 150, 201, 202, 500} {
		q := quoteExcerpt(long, pos)
		if !utf8.ValidString(q) {
			t.Errorf("pos %d: excerpt splits a UTF-8 sequence: %s", pos, q)
		}
		if n := utf8.RuneCountInString(q); n > maxExcerpt+6 {
			t.Errorf("pos %d: excerpt has %d runes", pos, n)
		}
	}
	// Invalid UTF-8 must not loop or panic.
	junk := strings.Repeat("\x80", 300)
	for _, pos := range []int{0, 150, 300} {
		_ = quoteExcerpt(junk, pos)
	}
	for _, tt := range []struct {
		in   string
		pos  int
		want string
	}{{"a", 0, "'a'"}, {"é", 0, "'é'"}, {"\xff", 0, `'\xff'`}, {"\n", 0, `'\n'`}, {"a", 1, "end of input"}, {"a", -1, "end of input"}} {
		if got := charAt(tt.in, tt.pos); got != tt.want {
			t.Errorf("charAt(%q, %d) = %s, want %s", tt.in, tt.pos, got, tt.want)
		}
	}
	if got := quoteExcerpt("short", 3); got != `"short"` {
		t.Errorf("short input quoted as %s", got)
	}
}
