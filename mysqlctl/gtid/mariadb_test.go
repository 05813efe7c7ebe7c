package gtid

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func mustPos(t testing.TB, s string) MariaDBPos {
	t.Helper()
	p, err := ParseMariaDBPos(s)
	if err != nil {
		t.Fatalf("ParseMariaDBPos(%q): %v", s, err)
	}
	checkPosInvariant(t, p)
	return p
}

func checkPosInvariant(t testing.TB, p MariaDBPos) {
	t.Helper()
	for i := 1; i < len(p.gtids); i++ {
		if p.gtids[i-1].Domain >= p.gtids[i].Domain {
			t.Fatalf("domains out of order or duplicated: %v", p.gtids)
		}
	}
}

func TestParseMariaDBPosValid(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"whitespace", " \n\t", ""},
		{"single", "0-1-100", "0-1-100"},
		{"two domains", "0-1-100,1-2-5", "0-1-100,1-2-5"},
		{"sorted by domain numerically", "10-1-1,2-1-1,1-1-1", "1-1-1,2-1-1,10-1-1"},
		{"whitespace around commas", " 0-1-100 ,\n 1-2-5 ", "0-1-100,1-2-5"},
		{"seq zero", "0-1-0", "0-1-0"},
		{"zeros", "0-0-0", "0-0-0"},
		{"max values", "4294967295-4294967295-18446744073709551615", "4294967295-4294967295-18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustPos(t, tt.in)
			if got.String() != tt.want {
				t.Fatalf("String() = %q, want %q", got.String(), tt.want)
			}
			if again := mustPos(t, got.String()); !again.Equal(got) {
				t.Fatalf("round trip of %q gave %q", got, again)
			}
			if got.IsEmpty() != (tt.want == "") {
				t.Fatalf("IsEmpty() = %v", got.IsEmpty())
			}
		})
	}
}

func TestParseMariaDBPosInvalid(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		pos    int
		reason string
	}{
		{"garbage", "abc", 0, "domain is not a number"},
		{"mysql set", u1 + ":1", 1, "unexpected 'e' after domain"},
		{"two parts", "0-1", 3, "GTID ends after server_id"},
		{"one part", "0", 1, "GTID ends after domain"},
		{"missing seq", "0-1-", 4, "seq_no is not a number"},
		{"missing server", "0--5", 2, "server_id is not a number"},
		{"four parts", "0-1-2-3", 5, "unexpected '-' after seq_no"},
		{"colon separator", "0:1:2", 1, "unexpected ':' after domain; want '-'"},
		{"negative domain", "-1-1-1", 0, "domain is not a number"},
		{"plus sign", "+0-1-1", 0, "domain is not a number"},
		{"domain overflow", "4294967296-1-1", 0, "domain exceeds the maximum 4294967295"},
		{"server overflow", "0-4294967296-1", 2, "server_id exceeds"},
		{"seq overflow", "0-1-18446744073709551616", 4, "seq_no exceeds the maximum 18446744073709551615"},
		{"huge seq", "0-1-" + strings.Repeat("9", 30), 4, "seq_no exceeds"},
		{"leading zero", "00-1-1", 0, "domain has a leading zero"},
		{"leading zero seq", "0-1-007", 4, "seq_no has a leading zero"},
		{"duplicate domain", "0-1-5,1-1-1,0-2-7", 12, "duplicate domain 0 (first at byte 0)"},
		{"duplicate identical", "0-1-5,0-1-5", 6, "duplicate domain 0"},
		{"trailing comma", "0-1-5,", 5, "trailing ','"},
		{"trailing comma space", "0-1-5 , ", 6, "trailing ','"},
		{"leading comma", ",0-1-5", 0, "empty GTID"},
		{"double comma", "0-1-5,,1-1-1", 6, "empty GTID"},
		{"missing comma", "0-1-5 1-1-1", 6, "unexpected '1' after seq_no"},
		{"junk after", "0-1-5x", 5, "unexpected 'x' after seq_no"},
		{"space inside", "0 -1-5", 1, "unexpected ' ' after domain"},
		{"semicolon", "0-1-5;1-1-1", 5, "unexpected ';'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMariaDBPos(tt.in)
			if err == nil {
				t.Fatalf("ParseMariaDBPos(%q) = %q, want error", tt.in, got)
			}
			if !got.IsEmpty() {
				t.Errorf("failed parse returned non-empty position %q", got)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *ParseError: %v", err, err)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("errors.Is(err, ErrMalformed) = false")
			}
			if pe.Input != tt.in || pe.Flavor != MariaDB {
				t.Errorf("ParseError{Input: %q, Flavor: %v}", pe.Input, pe.Flavor)
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

func TestMariaDBPosAccessors(t *testing.T) {
	p := mustPos(t, "5-3-50, 0-1-100,4294967295-2-1")
	if got, want := p.Domains(), []uint32{0, 5, math.MaxUint32}; !slices.Equal(got, want) {
		t.Errorf("Domains() = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		domain uint32
		seq    uint64
		ok     bool
	}{{0, 100, true}, {5, 50, true}, {math.MaxUint32, 1, true}, {1, 0, false}, {4, 0, false}} {
		if seq, ok := p.Seq(tt.domain); seq != tt.seq || ok != tt.ok {
			t.Errorf("Seq(%d) = (%d, %v), want (%d, %v)", tt.domain, seq, ok, tt.seq, tt.ok)
		}
	}
	if g, ok := p.GTID(5); !ok || g != (MariaDBGTID{Domain: 5, ServerID: 3, Seq: 50}) || g.String() != "5-3-50" {
		t.Errorf("GTID(5) = %v, %v", g, ok)
	}
	// Returned slices are copies: modifying them must not change p.
	p.GTIDs()[0].Seq = 999
	p.Domains()[0] = 999
	if p.String() != "0-1-100,5-3-50,4294967295-2-1" {
		t.Errorf("accessor results alias the position: %q", p)
	}
	var zero MariaDBPos
	if !zero.IsEmpty() || zero.String() != "" || len(zero.Domains()) != 0 || !zero.Equal(mustPos(t, "")) {
		t.Error("zero MariaDBPos is not the empty position")
	}
	if _, ok := zero.Seq(0); ok {
		t.Error("zero MariaDBPos has domain 0")
	}
}

func TestMariaDBPosContainsCompare(t *testing.T) {
	tests := []struct {
		name     string
		a, b     string
		contains bool // a has executed everything b has
		cmp      int
		ok       bool
	}{
		{"both empty", "", "", true, 0, true},
		{"anything contains empty", "0-1-5", "", true, 1, true},
		{"empty behind", "", "0-1-5", false, -1, true},
		{"equal", "0-1-5,1-2-3", "1-2-3, 0-1-5", true, 0, true},
		{"ahead in one domain", "0-1-6,1-2-3", "0-1-5,1-2-3", true, 1, true},
		{"ahead with other server", "0-2-6", "0-1-5", true, 1, true},
		{"behind", "0-1-4", "0-1-5", false, -1, true},
		{"extra domain", "0-1-5,1-1-1", "0-1-5", true, 1, true},
		{"missing domain", "0-1-5", "0-1-5,1-1-1", false, -1, true},
		{"ahead in one behind in other", "0-1-6,1-1-1", "0-1-5,1-1-2", false, 0, false},
		{"disjoint domains", "0-1-5", "1-1-5", false, 0, false},
		// Equal seq_no from different servers: two different transactions
		// got the same number, the histories forked.
		{"same seq different server", "0-1-5", "0-2-5", false, 0, false},
		// seq_no 0 carries no transactions, so it is the same as absent.
		{"seq zero vs absent", "0-1-0", "", true, 0, true},
		{"seq zero vs other server seq zero", "0-1-0", "0-2-0", true, 0, true},
		{"absent domain vs seq zero", "1-1-1", "0-1-0,1-1-1", true, 0, true},
		{"max seq", "0-1-18446744073709551615", "0-1-18446744073709551614", true, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustPos(t, tt.a), mustPos(t, tt.b)
			if got := a.Contains(b); got != tt.contains {
				t.Errorf("Contains = %v, want %v", got, tt.contains)
			}
			cmp, ok := a.Compare(b)
			if cmp != tt.cmp || ok != tt.ok {
				t.Errorf("Compare = (%d, %v), want (%d, %v)", cmp, ok, tt.cmp, tt.ok)
			}
			rcmp, rok := b.Compare(a)
			if rcmp != -tt.cmp || rok != tt.ok {
				t.Errorf("reverse Compare = (%d, %v), want (%d, %v)", rcmp, rok, -tt.cmp, tt.ok)
			}
		})
	}
}

func TestMariaDBPosEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"0-1-5,1-1-1", "1-1-1,0-1-5", true},
		{"0-1-5", "0-2-5", false}, // server_id matters
		{"0-1-5", "0-1-6", false},
		{"0-1-0", "", false}, // textually different, though Compare says 0
		{"0-1-5", "0-1-5,1-1-1", false},
	}
	for _, tt := range tests {
		a, b := mustPos(t, tt.a), mustPos(t, tt.b)
		if a.Equal(b) != tt.want || b.Equal(a) != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, a.Equal(b), tt.want)
		}
	}
}

func TestMariaDBPosMerge(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"empty", "", "", ""},
		{"empty left", "", "0-1-5", "0-1-5"},
		{"empty right", "0-1-5", "", "0-1-5"},
		{"max per domain", "0-1-5,1-1-9", "0-1-7,1-1-3", "0-1-7,1-1-9"},
		{"union of domains", "0-1-5,2-1-1", "1-1-3,3-1-4", "0-1-5,1-1-3,2-1-1,3-1-4"},
		{"higher seq brings its server", "0-1-5", "0-2-6", "0-2-6"},
		{"tie keeps receiver", "0-1-5", "0-2-5", "0-1-5"},
		{"retrieved ahead of executed", "0-1-100", "0-1-120,1-3-1", "0-1-120,1-3-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustPos(t, tt.a), mustPos(t, tt.b)
			got := a.Merge(b)
			checkPosInvariant(t, got)
			if got.String() != tt.want {
				t.Errorf("Merge = %q, want %q", got, tt.want)
			}
			if a.String() != mustPos(t, tt.a).String() || b.String() != mustPos(t, tt.b).String() {
				t.Errorf("operands modified")
			}
		})
	}
}

func TestMariaDBPosBehind(t *testing.T) {
	tests := []struct {
		name, a, b string
		want       uint64
	}{
		{"equal", "0-1-5", "0-1-5", 0},
		{"behind", "0-1-5", "0-1-9", 4},
		{"ahead counts zero", "0-1-9", "0-1-5", 0},
		{"missing domain counts its seq", "0-1-5", "0-1-5,1-1-7", 7},
		{"sum over domains", "0-1-5,1-1-1", "0-1-8,1-1-4,2-1-2", 3 + 3 + 2},
		{"ahead in one does not offset behind in other", "0-1-100,1-1-1", "0-1-5,1-1-4", 3},
		{"empty behind everything", "", "0-1-10,1-1-20", 30},
		{"against empty", "0-1-10", "", 0},
		{"server ids ignored", "0-1-5", "0-2-5", 0},
		{"saturates", "", "0-1-18446744073709551615,1-1-2", math.MaxUint64},
		{"max without overflow", "0-1-1", "0-1-18446744073709551615", math.MaxUint64 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustPos(t, tt.a).Behind(mustPos(t, tt.b)); got != tt.want {
				t.Errorf("(%q).Behind(%q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestMariaDBPosTextMarshaling(t *testing.T) {
	var out struct{ Pos MariaDBPos }
	if err := json.Unmarshal([]byte(`{"Pos":"1-2-3, 0-1-5"}`), &out); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"Pos":"0-1-5,1-2-3"}` {
		t.Fatalf("Marshal = %s", data)
	}
	if err := json.Unmarshal([]byte(`{"Pos":"0-1"}`), &out); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	if out.Pos.String() != "0-1-5,1-2-3" {
		t.Fatalf("failed Unmarshal modified the value: %q", out.Pos)
	}
}
