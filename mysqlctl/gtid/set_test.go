package gtid

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

const (
	u1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	u2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
	u3 = "00000000-0000-0000-0000-00000000000a"
	// U1 is u1 in upper case, as SHOW REPLICA STATUS prints some UUIDs.
	U1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"

	maxGNOStr  = "9223372036854775807" // 2^63-1
	overGNOStr = "9223372036854775808" // 2^63
)

// mustSet parses s or fails the test; only for inputs known to be valid.
func mustSet(t testing.TB, s string) Set {
	t.Helper()
	set, err := ParseSet(s)
	if err != nil {
		t.Fatalf("ParseSet(%q): %v", s, err)
	}
	checkSetInvariant(t, set)
	return set
}

// checkSetInvariant verifies the normal form every operation relies on.
func checkSetInvariant(t testing.TB, s Set) {
	t.Helper()
	for i, g := range s.groups {
		if i > 0 && s.groups[i-1].key.compare(g.key) >= 0 {
			t.Fatalf("groups out of order or duplicated: %v then %v", s.groups[i-1].key, g.key)
		}
		if len(g.ivs) == 0 {
			t.Fatalf("empty group %v", g.key)
		}
		if g.key.uuid != strings.ToLower(g.key.uuid) || g.key.tag != strings.ToLower(g.key.tag) {
			t.Fatalf("key not lowercase: %v", g.key)
		}
		for k, iv := range g.ivs {
			if iv.start < 1 || iv.start > iv.end || iv.end > maxGNO {
				t.Fatalf("bad interval %v in %v", iv, g.key)
			}
			if k > 0 && g.ivs[k-1].end+1 >= iv.start {
				t.Fatalf("intervals %v and %v in %v overlap or touch", g.ivs[k-1], iv, g.key)
			}
		}
	}
}

func TestParseSetValid(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"only whitespace", " \n\t\r\n ", ""},
		{"single interval", u1 + ":1-5", u1 + ":1-5"},
		{"single transaction", u1 + ":7", u1 + ":7"},
		{"degenerate range prints as N", u1 + ":5-5", u1 + ":5"},
		{"mysql docs example", U1 + ":1-5:7-9, " + strings.ToUpper(u2) + ":1", u1 + ":1-5:7-9," + u2 + ":1"},
		{"adjacent intervals merge", u1 + ":1-3:4-5", u1 + ":1-5"},
		{"adjacent singles merge", u1 + ":1:2:3", u1 + ":1-3"},
		{"unsorted intervals sort and merge", u1 + ":4-5:1-3", u1 + ":1-5"},
		{"overlapping intervals merge", u1 + ":1-5:3-8", u1 + ":1-8"},
		{"contained interval absorbed", u1 + ":1-10:3-4", u1 + ":1-10"},
		{"duplicate transaction", u1 + ":5:5", u1 + ":5"},
		{"gap of one is kept", u1 + ":1:3", u1 + ":1:3"},
		{"uuids sorted", u2 + ":1," + u1 + ":2", u1 + ":2," + u2 + ":1"},
		{"mixed-case uuid dedupe", U1 + ":1-3," + u1 + ":4-6", u1 + ":1-6"},
		{"same uuid twice non-adjacent", u1 + ":1," + u2 + ":1," + u1 + ":10", u1 + ":1:10," + u2 + ":1"},
		{"show replica status separator", u1 + ":1-5,\n" + u2 + ":1-3", u1 + ":1-5," + u2 + ":1-3"},
		{"crlf and tabs after comma", u1 + ":1,\r\n\t" + u2 + ":2", u1 + ":1," + u2 + ":2"},
		{"space before comma", u1 + ":1 ,  " + u2 + ":2", u1 + ":1," + u2 + ":2"},
		{"leading and trailing whitespace", "\n " + u1 + ":1\n", u1 + ":1"},
		{"max gno single", u1 + ":" + maxGNOStr, u1 + ":" + maxGNOStr},
		{"full range", u1 + ":1-" + maxGNOStr, u1 + ":1-" + maxGNOStr},
		{"adjacent at the top merge", u1 + ":9223372036854775806:" + maxGNOStr, u1 + ":9223372036854775806-" + maxGNOStr},
		{"nil uuid", "00000000-0000-0000-0000-000000000000:1", "00000000-0000-0000-0000-000000000000:1"},
		{"tagged", u1 + ":tag:1-5", u1 + ":tag:1-5"},
		{"untagged first then tags sorted", u1 + ":zz:1:Tag_A:1-3:aa:7", u1 + ":aa:7:tag_a:1-3:zz:1"},
		{"untagged before tag in one group", u1 + ":1-5:b:7", u1 + ":1-5:b:7"},
		{"tag applies until next tag", u1 + ":a:1:3:b:5:6", u1 + ":a:1:3:b:5-6"},
		{"tag case-insensitive dedupe", u1 + ":a:1," + U1 + ":A:2", u1 + ":a:1-2"},
		{"tagged and untagged are distinct sources", u1 + ":t:1," + u1 + ":2", u1 + ":2:t:1"},
		{"same tag twice in a group", u1 + ":a:1:b:2:a:3", u1 + ":a:1:3:b:2"},
		{"underscore tag", u1 + ":_:1", u1 + ":_:1"},
		{"tag with digits", u1 + ":_9x:1", u1 + ":_9x:1"},
		{"32-character tag", u1 + ":" + strings.Repeat("t", 32) + ":1", u1 + ":" + strings.Repeat("t", 32) + ":1"},
		{"tagged groups of several uuids", u2 + ":x:1," + u1 + ":y:2", u1 + ":y:2," + u2 + ":x:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSet(tt.in)
			if err != nil {
				t.Fatalf("ParseSet(%q): %v", tt.in, err)
			}
			checkSetInvariant(t, got)
			if got.String() != tt.want {
				t.Fatalf("ParseSet(%q).String() = %q, want %q", tt.in, got.String(), tt.want)
			}
			again := mustSet(t, got.String())
			if !again.Equal(got) || again.String() != tt.want {
				t.Fatalf("round trip of %q gave %q", tt.want, again.String())
			}
			if got.IsEmpty() != (tt.want == "") {
				t.Fatalf("IsEmpty() = %v for %q", got.IsEmpty(), tt.want)
			}
		})
	}
}

func TestParseSetInvalid(t *testing.T) {
	uuidLenPlus := func(n int) int { return len(u1) + n }
	tests := []struct {
		name   string
		in     string
		pos    int
		reason string // substring of ParseError.Reason
	}{
		{"garbage", "garbage", 0, "not a hex digit"},
		{"short non-uuid", "abc:1-x", 3, "not a hex digit"},
		{"uuid without hyphens", "3e11fa4771ca11e19e33c80aa9429562:1", 8, "want '-' at UUID offset 8"},
		{"hyphen misplaced", "3e11fa4-771ca-11e1-9e33-c80aa9429562:1", 7, "'-' is not a hex digit"},
		{"non-hex in uuid", "3e11fa47-71ca-11e1-9e33-c80aa942956g:1", 35, "'g' is not a hex digit"},
		{"truncated uuid", "3e11fa47-71ca", 13, "truncated"},
		{"truncated uuid with interval", "3e11fa47-71ca:1", 13, "want '-' at UUID offset 13"},
		{"uuid too long", u1 + "0:1", uuidLenPlus(0), "longer than 36"},
		{"braced uuid", "{" + u1 + "}:1", 0, "not a hex digit"},
		{"uuid without intervals", u1, uuidLenPlus(0), "has no intervals"},
		{"uuid without intervals then more", u1 + "," + u2 + ":1", uuidLenPlus(0), "has no intervals"},
		{"space between uuid and colon", u1 + " :1", uuidLenPlus(0), "has no intervals"},
		{"junk after uuid", u1 + ";1", uuidLenPlus(0), "unexpected ';' after UUID"},
		{"empty interval at end", u1 + ":", uuidLenPlus(1), "empty or malformed interval"},
		{"empty interval in middle", u1 + "::1", uuidLenPlus(1), "empty or malformed interval"},
		{"empty interval before comma", u1 + ":1:," + u2 + ":1", uuidLenPlus(3), "empty or malformed interval"},
		{"space inside interval list", u1 + ": 1", uuidLenPlus(1), "empty or malformed interval"},
		{"zero", u1 + ":0", uuidLenPlus(1), "interval start is 0"},
		{"zero start", u1 + ":0-5", uuidLenPlus(1), "interval start is 0"},
		{"zero end", u1 + ":1-0", uuidLenPlus(3), "interval end is 0"},
		{"reversed range", u1 + ":5-3", uuidLenPlus(1), "reversed interval 5-3"},
		{"reversed range at top", u1 + ":" + maxGNOStr + "-1", uuidLenPlus(1), "reversed"},
		{"leading zero", u1 + ":01", uuidLenPlus(1), "interval start has a leading zero"},
		{"leading zero in end", u1 + ":1-05", uuidLenPlus(3), "interval end has a leading zero"},
		{"overflow int64", u1 + ":" + overGNOStr, uuidLenPlus(1), "interval start exceeds the maximum 9223372036854775807"},
		{"overflow int64 in end", u1 + ":1-" + overGNOStr, uuidLenPlus(3), "interval end exceeds"},
		{"overflow uint64", u1 + ":18446744073709551616", uuidLenPlus(1), "exceeds"},
		{"overflow many digits", u1 + ":" + strings.Repeat("9", 40), uuidLenPlus(1), "exceeds"},
		{"missing end", u1 + ":1-", uuidLenPlus(3), "interval end is not a number"},
		{"non-numeric end", u1 + ":1-x", uuidLenPlus(3), "interval end is not a number"},
		{"double dash", u1 + ":1--5", uuidLenPlus(3), "interval end is not a number"},
		{"negative", u1 + ":-1", uuidLenPlus(1), "empty or malformed interval"},
		{"plus sign", u1 + ":+1", uuidLenPlus(1), "empty or malformed interval"},
		{"letter after number", u1 + ":1x", uuidLenPlus(2), "unexpected 'x' after interval"},
		{"three-part range", u1 + ":1-5-7", uuidLenPlus(4), "unexpected '-' after interval"},
		{"non-ascii after number", u1 + ":1é", uuidLenPlus(2), "unexpected 'é' after interval"},
		{"invalid utf-8 after number", u1 + ":1\xff", uuidLenPlus(2), `unexpected '\xff' after interval`},
		{"non-ascii in uuid", "3e11fa47-71ca-11e1-9e33-c80aa94295é2:1", 34, "'é' is not a hex digit"},
		{"trailing comma", u1 + ":1,", uuidLenPlus(2), "trailing ','"},
		{"trailing comma and newline", u1 + ":1,\n", uuidLenPlus(2), "trailing ','"},
		{"leading comma", "," + u1 + ":1", 0, "empty UUID set"},
		{"double comma", u1 + ":1,," + u2 + ":1", uuidLenPlus(3), "empty UUID set"},
		{"comma space comma", u1 + ":1, ," + u2 + ":1", uuidLenPlus(4), "empty UUID set"},
		{"only comma", " , ", 1, "empty UUID set"},
		{"missing comma", u1 + ":1 " + u2 + ":1", uuidLenPlus(3), "separated by ','"},
		{"junk after set", u1 + ":1 x", uuidLenPlus(3), "separated by ','"},
		{"semicolon separator", u1 + ":1;" + u2 + ":1", uuidLenPlus(2), "unexpected ';' after interval"},
		{"tag without intervals", u1 + ":tag", uuidLenPlus(4), `tag "tag" must be followed`},
		{"tag then colon only", u1 + ":tag:", uuidLenPlus(4), "must be followed"},
		{"tag then tag", u1 + ":a:b:1", uuidLenPlus(2), `tag "a" must be followed`},
		{"tag at end after intervals", u1 + ":1:tag", uuidLenPlus(6), "must be followed"},
		{"tag before comma", u1 + ":tag," + u2 + ":1", uuidLenPlus(4), "must be followed"},
		{"tag with hyphen", u1 + ":ta-g:1", uuidLenPlus(3), "must be followed"},
		{"tag with dot", u1 + ":ta.g:1", uuidLenPlus(3), "must be followed"},
		{"33-character tag", u1 + ":" + strings.Repeat("t", 33) + ":1", uuidLenPlus(1), "longer than 32"},
		{"NUL byte", "\x00", 0, "not a hex digit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSet(tt.in)
			if err == nil {
				t.Fatalf("ParseSet(%q) = %q, want error", tt.in, got)
			}
			if !got.IsEmpty() {
				t.Errorf("failed parse returned non-empty set %q", got)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *ParseError: %v", err, err)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("errors.Is(err, ErrMalformed) = false for %v", err)
			}
			if pe.Input != tt.in || pe.Flavor != MySQL {
				t.Errorf("ParseError{Input: %q, Flavor: %v}, want input %q, MySQL", pe.Input, pe.Flavor, tt.in)
			}
			if pe.Pos != tt.pos {
				t.Errorf("Pos = %d, want %d (%v)", pe.Pos, tt.pos, err)
			}
			if !strings.Contains(pe.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to contain %q", pe.Reason, tt.reason)
			}
		})
	}
}

func TestSetCount(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0},
		{u1 + ":1", 1},
		{u1 + ":1-5", 5},
		{u1 + ":1-5:7-9", 8},
		{u1 + ":1-5:3-7", 7},
		{u1 + ":1-5," + u2 + ":1-5", 10},
		{u1 + ":1-5:t:1-5", 10},
		{u1 + ":" + maxGNOStr, 1},
		{u1 + ":1-" + maxGNOStr, math.MaxInt64},
		// Two full ranges still fit in uint64: 2*(2^63-1) = 2^64-2.
		{u1 + ":1-" + maxGNOStr + "," + u2 + ":1-" + maxGNOStr, math.MaxUint64 - 1},
		// Three do not: the count saturates instead of wrapping.
		{u1 + ":1-" + maxGNOStr + "," + u2 + ":1-" + maxGNOStr + "," + u3 + ":1-" + maxGNOStr, math.MaxUint64},
		{u1 + ":1-" + maxGNOStr + "," + u2 + ":1-" + maxGNOStr + "," + u3 + ":1-2", math.MaxUint64},
		{u1 + ":1-" + maxGNOStr + "," + u2 + ":1-" + maxGNOStr + "," + u3 + ":1", math.MaxUint64},
	}
	for _, tt := range tests {
		if got := mustSet(t, tt.in).Count(); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// setOpCase is one row of the binary-operation tables below.
type setOpCase struct {
	name, a, b, want string
}

func runSetOp(t *testing.T, tests []setOpCase, op func(a, b Set) Set) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustSet(t, tt.a), mustSet(t, tt.b)
			aStr, bStr := a.String(), b.String()
			got := op(a, b)
			checkSetInvariant(t, got)
			if got.String() != tt.want {
				t.Errorf("op(%q, %q) = %q, want %q", tt.a, tt.b, got.String(), tt.want)
			}
			if a.String() != aStr || b.String() != bStr {
				t.Errorf("operands were modified: %q, %q", a.String(), b.String())
			}
		})
	}
}

func TestSetUnion(t *testing.T) {
	runSetOp(t, []setOpCase{
		{"both empty", "", "", ""},
		{"empty left", "", u1 + ":1-3", u1 + ":1-3"},
		{"empty right", u1 + ":1-3", "", u1 + ":1-3"},
		{"disjoint uuids", u1 + ":1-3", u2 + ":1", u1 + ":1-3," + u2 + ":1"},
		{"adjacent merge", u1 + ":1-3", u1 + ":4-6", u1 + ":1-6"},
		{"gap kept", u1 + ":1-3", u1 + ":5-6", u1 + ":1-3:5-6"},
		{"fills gap", u1 + ":1-3:5-6", u1 + ":4", u1 + ":1-6"},
		{"overlap", u1 + ":1-5", u1 + ":3-9", u1 + ":1-9"},
		{"superset absorbs", u1 + ":2-3:6-7", u1 + ":1-10", u1 + ":1-10"},
		{"interleaved", u1 + ":1:5:9", u1 + ":3:7", u1 + ":1:3:5:7:9"},
		{"bridges many", u1 + ":1-2:4-5:7-8", u1 + ":3:6", u1 + ":1-8"},
		{"tags separate", u1 + ":1-3", u1 + ":t:1-3", u1 + ":1-3:t:1-3"},
		{"tags merge", u1 + ":t:1-3", u1 + ":t:4", u1 + ":t:1-4"},
		{"max bound", u1 + ":1-9223372036854775806", u1 + ":" + maxGNOStr, u1 + ":1-" + maxGNOStr},
		{"three uuids", u1 + ":1," + u3 + ":1", u2 + ":1", u3 + ":1," + u1 + ":1," + u2 + ":1"},
	}, Set.Union)
}

func TestSetSubtract(t *testing.T) {
	runSetOp(t, []setOpCase{
		{"both empty", "", "", ""},
		{"minus empty", u1 + ":1-3", "", u1 + ":1-3"},
		{"empty minus", "", u1 + ":1-3", ""},
		{"minus itself", u1 + ":1-3:5," + u2 + ":1", u1 + ":1-3:5," + u2 + ":1", ""},
		{"split in the middle", u1 + ":1-10", u1 + ":4-6", u1 + ":1-3:7-10"},
		{"remove single from middle", u1 + ":1-10", u1 + ":5", u1 + ":1-4:6-10"},
		{"trim start", u1 + ":1-10", u1 + ":1-3", u1 + ":4-10"},
		{"trim end", u1 + ":1-10", u1 + ":8-12", u1 + ":1-7"},
		{"overlapping both ends", u1 + ":3-8", u1 + ":1-4:7-20", u1 + ":5-6"},
		{"one b interval spans several a", u1 + ":1-2:4-5:7-8", u1 + ":2-7", u1 + ":1:8"},
		{"many holes", u1 + ":1-20", u1 + ":2:4:6-7:19-25", u1 + ":1:3:5:8-18"},
		{"disjoint", u1 + ":1-3", u1 + ":5-9", u1 + ":1-3"},
		{"whole uuid removed", u1 + ":1-5," + u2 + ":1-5", u1 + ":1-5", u2 + ":1-5"},
		{"whole uuid removed by superset", u1 + ":3-4," + u2 + ":1", u1 + ":1-100", u2 + ":1"},
		{"other uuid untouched", u1 + ":1-5", u2 + ":1-5", u1 + ":1-5"},
		{"tag only removes tagged", u1 + ":1-5:t:1-5", u1 + ":t:1-5", u1 + ":1-5"},
		{"untagged only removes untagged", u1 + ":1-5:t:1-5", u1 + ":2-4", u1 + ":1:5:t:1-5"},
		{"max bound", u1 + ":1-" + maxGNOStr, u1 + ":" + maxGNOStr, u1 + ":1-9223372036854775806"},
		{"max bound start", u1 + ":1-" + maxGNOStr, u1 + ":1", u1 + ":2-" + maxGNOStr},
		{"full range minus middle", u1 + ":1-" + maxGNOStr, u1 + ":2-9223372036854775806", u1 + ":1:" + maxGNOStr},
	}, Set.Subtract)
}

func TestSetIntersect(t *testing.T) {
	runSetOp(t, []setOpCase{
		{"empty", u1 + ":1-3", "", ""},
		{"disjoint uuids", u1 + ":1-3", u2 + ":1-3", ""},
		{"disjoint intervals", u1 + ":1-3", u1 + ":4-6", ""},
		{"overlap", u1 + ":1-5", u1 + ":3-9", u1 + ":3-5"},
		{"pieces", u1 + ":1-10", u1 + ":2:4-5:9-12", u1 + ":2:4-5:9-10"},
		{"tags", u1 + ":1-5:t:1-5", u1 + ":t:3-9", u1 + ":t:3-5"},
		{"multi uuid", u1 + ":1-5," + u2 + ":1-5", u1 + ":5-6," + u2 + ":1", u1 + ":5," + u2 + ":1"},
	}, Set.Intersect)
}

func TestSetContainsCompareEqual(t *testing.T) {
	tests := []struct {
		name     string
		a, b     string
		contains bool // a ⊇ b
		cmp      int
		ok       bool
	}{
		{"both empty", "", "", true, 0, true},
		{"anything contains empty", u1 + ":1", "", true, 1, true},
		{"empty contains nothing", "", u1 + ":1", false, -1, true},
		{"equal", u1 + ":1-5," + u2 + ":3", U1 + ":1-3:4-5," + u2 + ":3", true, 0, true},
		{"superset interval", u1 + ":1-10", u1 + ":2-3:5-9", true, 1, true},
		{"subset", u1 + ":2-3", u1 + ":1-10", false, -1, true},
		{"exact bounds", u1 + ":3-7", u1 + ":3-7", true, 0, true},
		{"b spans a gap", u1 + ":1-3:5-7", u1 + ":3-5", false, 0, false},
		{"b starts before", u1 + ":3-7", u1 + ":2-4", false, 0, false},
		{"b ends after", u1 + ":3-7", u1 + ":6-8", false, 0, false},
		{"missing uuid", u1 + ":1-10", u1 + ":1-10," + u2 + ":1", false, -1, true},
		{"diverged uuids", u1 + ":1-10", u2 + ":1", false, 0, false},
		{"diverged: errant on each side", u1 + ":1-10," + u2 + ":1", u1 + ":1-11", false, 0, false},
		{"tag is a different source", u1 + ":1-10", u1 + ":t:1", false, 0, false},
		{"tagged contained", u1 + ":1-10:t:1-10", u1 + ":t:4", true, 1, true},
		{"later uuid contained", u1 + ":1," + u2 + ":1-9", u2 + ":4", true, 1, true},
		{"max bound", u1 + ":1-" + maxGNOStr, u1 + ":" + maxGNOStr, true, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustSet(t, tt.a), mustSet(t, tt.b)
			if got := a.Contains(b); got != tt.contains {
				t.Errorf("Contains = %v, want %v", got, tt.contains)
			}
			cmp, ok := a.Compare(b)
			if cmp != tt.cmp || ok != tt.ok {
				t.Errorf("Compare = (%d, %v), want (%d, %v)", cmp, ok, tt.cmp, tt.ok)
			}
			// Compare must be antisymmetric.
			rcmp, rok := b.Compare(a)
			if rcmp != -tt.cmp || rok != tt.ok {
				t.Errorf("reverse Compare = (%d, %v), want (%d, %v)", rcmp, rok, -tt.cmp, tt.ok)
			}
			wantEqual := tt.ok && tt.cmp == 0
			if a.Equal(b) != wantEqual || b.Equal(a) != wantEqual {
				t.Errorf("Equal = %v/%v, want %v", a.Equal(b), b.Equal(a), wantEqual)
			}
		})
	}
}

func TestSetZeroValue(t *testing.T) {
	var zero Set
	if !zero.IsEmpty() || zero.Count() != 0 || zero.String() != "" {
		t.Fatalf("zero Set is not empty: %q", zero)
	}
	parsed := mustSet(t, "")
	if !zero.Equal(parsed) || !parsed.Equal(zero) {
		t.Fatal("zero Set differs from ParseSet(\"\")")
	}
	a := mustSet(t, u1+":1")
	if !zero.Union(a).Equal(a) || !a.Subtract(zero).Equal(a) || !zero.Subtract(a).IsEmpty() {
		t.Fatal("zero Set does not behave as the empty set")
	}
}

// TestSetOperationsDoNotAlias guards the immutability promise: mutating
// nothing is easy, but a result that shares a backing array with an operand
// would be corrupted by a later in-place normalisation.
func TestSetOperationsDoNotAlias(t *testing.T) {
	a := mustSet(t, u1+":1-3:7-9,"+u2+":1")
	b := mustSet(t, u1+":4-6")
	u := a.Union(b)
	_ = u.Subtract(a).Union(b).Intersect(u)
	if a.String() != u1+":1-3:7-9,"+u2+":1" || b.String() != u1+":4-6" || u.String() != u1+":1-9,"+u2+":1" {
		t.Fatalf("operands changed: a=%q b=%q u=%q", a, b, u)
	}
}

func TestSetTextMarshaling(t *testing.T) {
	type doc struct {
		Executed Set `json:"executed"`
	}
	in := doc{Executed: mustSet(t, u2+":1-3,"+U1+":5")}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"executed":"` + u1 + ":5," + u2 + `:1-3"}`; string(data) != want {
		t.Fatalf("Marshal = %s, want %s", data, want)
	}
	var out doc
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Executed.Equal(in.Executed) {
		t.Fatalf("Unmarshal = %q, want %q", out.Executed, in.Executed)
	}
	err = json.Unmarshal([]byte(`{"executed":"nonsense"}`), &out)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("Unmarshal of bad set: err = %v, want ErrMalformed", err)
	}
	if !out.Executed.Equal(in.Executed) {
		t.Fatalf("failed Unmarshal modified the value: %q", out.Executed)
	}
}
