package gtid

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrMalformed is matched (via errors.Is) by every error the parsers in this
// package return, so callers can tell "the server sent something we cannot
// read" apart from other failures without inspecting messages.
var ErrMalformed = errors.New("gtid: malformed input")

// ParseError describes why a GTID set or position could not be parsed.
type ParseError struct {
	Input  string // the complete input that was being parsed
	Pos    int    // byte offset in Input where the problem was found (best effort)
	Reason string // what is wrong, e.g. "interval end is not a number"
	Flavor Flavor // which syntax was expected; selects the "expected ..." hint
}

// maxExcerpt bounds how much of the input an error message quotes: gtid_executed
// on a long-lived cluster can be kilobytes long and would drown the log line.
const maxExcerpt = 80

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("gtid: parsing ")
	b.WriteString(quoteExcerpt(e.Input, e.Pos))
	b.WriteString(" at byte ")
	b.WriteString(strconv.Itoa(e.Pos))
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if form := e.Flavor.syntax(); form != "" {
		b.WriteString("; expected ")
		b.WriteString(form)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrMalformed) true for every ParseError.
func (e *ParseError) Unwrap() error { return ErrMalformed }

// quoteExcerpt quotes in, or for long inputs a window of about maxExcerpt bytes
// around pos with "…" marking the cut ends, so the message still shows the
// offending spot.
func quoteExcerpt(in string, pos int) string {
	if len(in) <= maxExcerpt {
		return strconv.Quote(in)
	}
	pos = min(max(pos, 0), len(in))
	start := max(pos-maxExcerpt/2, 0)
	start = min(start, len(in)-maxExcerpt)
	end := start + maxExcerpt
	// Do not split a UTF-8 sequence; a sequence is at most utf8.UTFMax bytes, so
	// bounded steps suffice even when the input is not valid UTF-8.
	for k := 0; k < utf8.UTFMax-1 && start > 0 && !utf8.RuneStart(in[start]); k++ {
		start--
	}
	for k := 0; k < utf8.UTFMax-1 && end < len(in) && !utf8.RuneStart(in[end]); k++ {
		end++
	}
	excerpt := in[start:end]
	if start > 0 {
		excerpt = "…" + excerpt
	}
	if end < len(in) {
		excerpt += "…"
	}
	return strconv.Quote(excerpt)
}
