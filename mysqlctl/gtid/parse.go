package gtid

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	uuidLen   = 36 // 8-4-4-4-12 hex digits with hyphens
	maxTagLen = 32 // MySQL 8.4: [a-z_][a-z0-9_]{0,31}
)

// ParseSet parses a MySQL GTID set such as
//
//	3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7-9,
//	4e11fa47-71ca-11e1-9e33-c80aa9429562:tag_a:1
//
// The empty string (or only whitespace) is the empty set. UUIDs and tags are
// case-insensitive; the same source may appear more than once and overlapping
// or adjacent intervals are merged. A tag applies to the intervals after it
// up to the next tag of the same UUID. Whitespace is allowed only at the ends
// and around the commas between UUID sets.
//
// Everything else is rejected with a [*ParseError]: malformed UUIDs or tags,
// a UUID or tag without intervals, empty elements (",,", trailing ","),
// transaction number 0, numbers above 2^63-1, leading zeros, and reversed
// ranges such as 5-3 (MySQL silently drops those, which would hide a bug in
// whatever produced the string).
func ParseSet(in string) (Set, error) {
	p := setParser{in: in}
	return p.parse()
}

type setParser struct {
	in  string
	pos int
}

func (p *setParser) fail(pos int, format string, args ...any) error {
	return &ParseError{Input: p.in, Pos: pos, Reason: fmt.Sprintf(format, args...), Flavor: MySQL}
}

func (p *setParser) parse() (Set, error) {
	collected := map[tsid][]interval{}
	p.pos = skipSpace(p.in, 0)
	if p.pos == len(p.in) {
		return Set{}, nil
	}
	for {
		if p.in[p.pos] == ',' {
			return Set{}, p.fail(p.pos, "empty UUID set before ','")
		}
		if err := p.parseUUIDSet(collected); err != nil {
			return Set{}, err
		}
		p.pos = skipSpace(p.in, p.pos)
		if p.pos == len(p.in) {
			break
		}
		if p.in[p.pos] != ',' {
			return Set{}, p.fail(p.pos, "unexpected %s; UUID sets are separated by ','", charAt(p.in, p.pos))
		}
		comma := p.pos
		p.pos = skipSpace(p.in, p.pos+1)
		if p.pos == len(p.in) {
			return Set{}, p.fail(comma, "trailing ','")
		}
	}

	groups := make([]group, 0, len(collected))
	for key, ivs := range collected {
		groups = append(groups, group{key, normalize(ivs)})
	}
	slices.SortFunc(groups, func(a, b group) int { return a.key.compare(b.key) })
	return Set{groups: groups}, nil
}

// parseUUIDSet parses "uuid:elem[:elem...]" where elem is an interval or a
// tag, adding the intervals to collected.
func (p *setParser) parseUUIDSet(collected map[tsid][]interval) error {
	uuid, err := p.parseUUID()
	if err != nil {
		return err
	}
	if p.pos == len(p.in) || p.in[p.pos] != ':' {
		if p.pos == len(p.in) || p.in[p.pos] == ',' || isSpace(p.in[p.pos]) {
			return p.fail(p.pos, "UUID %s has no intervals", uuid)
		}
		return p.fail(p.pos, "unexpected %s after UUID; want ':'", charAt(p.in, p.pos))
	}
	// Intervals are gathered per tag and handed to the map once, rather than
	// hashing the key for every interval.
	key := tsid{uuid: uuid}
	ivs := collected[key]
	flush := func() {
		if len(ivs) > 0 {
			collected[key] = ivs
		}
	}
	defer flush()
	for p.pos < len(p.in) && p.in[p.pos] == ':' {
		p.pos++
		switch {
		case p.pos < len(p.in) && isDigit(p.in[p.pos]):
			iv, err := p.parseInterval()
			if err != nil {
				return err
			}
			ivs = append(ivs, iv)
		case p.pos < len(p.in) && isTagStart(p.in[p.pos]):
			tag, err := p.parseTag()
			if err != nil {
				return err
			}
			// A tag with no intervals would be a silent no-op; it is always a
			// mistake in whatever built the string.
			if p.pos+1 >= len(p.in) || p.in[p.pos] != ':' || !isDigit(p.in[p.pos+1]) {
				return p.fail(p.pos, "tag %q must be followed by ':' and an interval", tag)
			}
			flush()
			key.tag = tag
			ivs = collected[key]
		default:
			return p.fail(p.pos, "empty or malformed interval after ':'")
		}
	}
	if p.pos < len(p.in) && p.in[p.pos] != ',' && !isSpace(p.in[p.pos]) {
		return p.fail(p.pos, "unexpected %s after interval", charAt(p.in, p.pos))
	}
	return nil
}

// parseUUID reads exactly 36 characters of 8-4-4-4-12 hex and returns them
// lowercased.
func (p *setParser) parseUUID() (string, error) {
	start := p.pos
	for k := range uuidLen {
		i := start + k
		if i == len(p.in) {
			return "", p.fail(i, "UUID is truncated; want 36 characters in 8-4-4-4-12 hex form")
		}
		c := p.in[i]
		switch k {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", p.fail(i, "malformed UUID: want '-' at UUID offset %d, got %s", k, charAt(p.in, i))
			}
		default:
			if !isHex(c) {
				return "", p.fail(i, "malformed UUID: %s is not a hex digit", charAt(p.in, i))
			}
		}
	}
	p.pos = start + uuidLen
	if p.pos < len(p.in) && (isHex(p.in[p.pos]) || p.in[p.pos] == '-') {
		return "", p.fail(p.pos, "malformed UUID: longer than 36 characters")
	}
	return strings.ToLower(p.in[start:p.pos]), nil
}

// parseTag reads a MySQL 8.4 GTID tag and returns it lowercased.
func (p *setParser) parseTag() (string, error) {
	start := p.pos
	for p.pos < len(p.in) && isTagChar(p.in[p.pos]) {
		p.pos++
	}
	if p.pos-start > maxTagLen {
		return "", p.fail(start, "tag is longer than %d characters", maxTagLen)
	}
	return strings.ToLower(p.in[start:p.pos]), nil
}

// parseInterval reads "N" or "N-M" with 1 <= N <= M <= 2^63-1.
func (p *setParser) parseInterval() (interval, error) {
	startPos := p.pos
	first, err := p.parseGNO("interval start")
	if err != nil {
		return interval{}, err
	}
	if p.pos == len(p.in) || p.in[p.pos] != '-' {
		return interval{first, first}, nil
	}
	p.pos++
	last, err := p.parseGNO("interval end")
	if err != nil {
		return interval{}, err
	}
	if last < first {
		return interval{}, p.fail(startPos, "reversed interval %d-%d; the end must not be below the start", first, last)
	}
	return interval{first, last}, nil
}

// parseGNO reads one transaction number (1..2^63-1, decimal, no leading zeros).
func (p *setParser) parseGNO(what string) (uint64, error) {
	start := p.pos
	v, end, reason := parseDecimal(p.in, start, maxGNO)
	if reason != "" {
		return 0, p.fail(start, "%s %s", what, reason)
	}
	if v == 0 {
		return 0, p.fail(start, "%s is 0; transaction numbers start at 1", what)
	}
	p.pos = end
	return v, nil
}

// parseDecimal reads the unsigned decimal number at in[pos:], which must be at
// most limit, returning the value and the offset just past it. On failure
// reason is a phrase to follow the number's name, e.g. "is not a number".
// Leading zeros are rejected: servers never print them and one spelling per
// value keeps canonical forms unique.
func parseDecimal(in string, pos int, limit uint64) (v uint64, end int, reason string) {
	end = pos
	for end < len(in) && isDigit(in[end]) {
		end++
	}
	switch {
	case end == pos:
		return 0, pos, "is not a number"
	case in[pos] == '0' && end-pos > 1:
		return 0, pos, "has a leading zero"
	}
	for _, c := range []byte(in[pos:end]) {
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, pos, fmt.Sprintf("exceeds the maximum %d", limit)
		}
		v = v*10 + d
	}
	return v, end, ""
}

// charAt quotes the character at in[pos] for an error message: the whole
// UTF-8 sequence if valid ('é', not 'Ã'), else the single byte ('\xff').
func charAt(in string, pos int) string {
	if pos < 0 || pos >= len(in) {
		return "end of input"
	}
	r, size := utf8.DecodeRuneInString(in[pos:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("'\\x%02x'", in[pos])
	}
	return strconv.QuoteRune(r)
}

func skipSpace(in string, pos int) int {
	for pos < len(in) && isSpace(in[pos]) {
		pos++
	}
	return pos
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func isTagStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isTagChar(c byte) bool { return isTagStart(c) || isDigit(c) }
