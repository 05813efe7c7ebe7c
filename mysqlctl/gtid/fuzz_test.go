package gtid

import (
	"errors"
	"math"
	"testing"
)

var setSeeds = []string{
	"",
	" \n",
	u1 + ":1-5",
	U1 + ":1-5:7-9, " + u2 + ":1",
	u1 + ":1-3:4-5",
	u1 + ":1-5,\n" + u2 + ":1-3",
	u1 + ":1-" + maxGNOStr,
	u1 + ":" + overGNOStr,
	u1 + ":9223372036854775806:" + maxGNOStr,
	u1 + ":5-3",
	u1 + ":0",
	u1 + ":01",
	u1 + ":tag:1-5",
	u1 + ":1-5:Tag_A:1-3:b:7",
	u1 + ":a:1:b:2:a:3",
	u1 + ":tag",
	u1 + ":1,," + u2 + ":1",
	u1 + ":1,",
	"abc:1-x",
	"3e11fa4771ca11e19e33c80aa9429562:1",
}

func FuzzParseSet(f *testing.F) {
	for _, s := range setSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSet(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error is not a ParseError matching ErrMalformed: %v", err)
			}
			if pe.Pos < 0 || pe.Pos > len(in) {
				t.Fatalf("Pos %d outside input of length %d", pe.Pos, len(in))
			}
			_ = err.Error()
			if !s.IsEmpty() {
				t.Fatalf("failed parse returned %q", s)
			}
			return
		}
		checkSetInvariant(t, s)
		canonical := s.String()
		again, err := ParseSet(canonical)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canonical, in, err)
		}
		if !again.Equal(s) || again.String() != canonical {
			t.Fatalf("round trip of %q: %q != %q", in, again, canonical)
		}
	})
}

func FuzzParseMariaDBPos(f *testing.F) {
	for _, s := range []string{
		"", "0-1-100", "0-1-100,1-2-5", " 0-1-100 ,\n 1-2-5 ", "10-1-1,2-1-1",
		"4294967295-4294967295-18446744073709551615", "4294967296-1-1", "0-1-18446744073709551616",
		"0-1-5,0-2-6", "0-1-5,", ",0-1-5", "00-1-1", "0-1", "0-1-2-3", u1 + ":1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ParseMariaDBPos(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error is not a ParseError matching ErrMalformed: %v", err)
			}
			if pe.Pos < 0 || pe.Pos > len(in) {
				t.Fatalf("Pos %d outside input of length %d", pe.Pos, len(in))
			}
			_ = err.Error()
			return
		}
		checkPosInvariant(t, p)
		again, err := ParseMariaDBPos(p.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", p, in, err)
		}
		if !again.Equal(p) || again.String() != p.String() {
			t.Fatalf("round trip of %q: %q != %q", in, again, p)
		}
		if !p.Contains(p) || p.Behind(p) != 0 || !ErrantMariaDB(p, p).IsEmpty() || !p.Merge(p).Equal(p) {
			t.Fatalf("%q is not consistent with itself", p)
		}
	})
}

// FuzzSetAlgebra checks set identities on pairs of parsed sets. The Count
// identities are only checked when no count saturates, because saturation
// deliberately loses information.
func FuzzSetAlgebra(f *testing.F) {
	for i, a := range setSeeds {
		f.Add(a, setSeeds[(i*7+3)%len(setSeeds)])
	}
	f.Add(u1+":1-10", u1+":4-6")
	f.Add(u1+":1-5,"+u2+":1-5", u1+":1-5")
	f.Add(u1+":1-"+maxGNOStr, u1+":2-9223372036854775806")
	f.Add(u1+":1-3:t:1-3", u1+":t:2:5")
	f.Fuzz(func(t *testing.T, aStr, bStr string) {
		a, errA := ParseSet(aStr)
		b, errB := ParseSet(bStr)
		if errA != nil || errB != nil {
			return
		}
		union, diff, inter := a.Union(b), a.Subtract(b), a.Intersect(b)
		for _, s := range []Set{union, diff, inter} {
			checkSetInvariant(t, s)
		}
		check := func(ok bool, what string) {
			t.Helper()
			if !ok {
				t.Fatalf("%s fails for a=%q b=%q (a∪b=%q a−b=%q a∩b=%q)", what, a, b, union, diff, inter)
			}
		}
		check(union.Contains(a) && union.Contains(b), "a∪b ⊇ a, b")
		check(union.Equal(b.Union(a)), "a∪b = b∪a")
		check(a.Contains(diff), "a−b ⊆ a")
		check(diff.Subtract(b).Equal(diff), "(a−b)∩b = ∅ via (a−b)−b = a−b")
		check(diff.Intersect(b).IsEmpty(), "(a−b)∩b = ∅")
		check(b.Subtract(diff).Equal(b), "b−(a−b) = b")
		check(diff.Union(inter).Equal(a), "(a−b) ∪ (a∩b) = a")
		check(inter.Equal(b.Intersect(a)), "a∩b = b∩a")
		check(a.Contains(inter) && b.Contains(inter), "a∩b ⊆ a, b")
		check(a.Subtract(a).IsEmpty() && a.Union(a).Equal(a) && a.Contains(a), "idempotence")
		check(a.Contains(b) == b.Subtract(a).IsEmpty(), "b ⊆ a ⇔ b−a = ∅")
		check(a.Contains(b) == inter.Equal(b), "b ⊆ a ⇔ a∩b = b")
		check(union.Subtract(b).Equal(diff), "(a∪b)−b = a−b")

		cmp, ok := a.Compare(b)
		switch {
		case a.Equal(b):
			check(cmp == 0 && ok, "Compare of equal sets")
		case a.Contains(b):
			check(cmp == 1 && ok, "Compare when a ⊋ b")
		case b.Contains(a):
			check(cmp == -1 && ok, "Compare when b ⊋ a")
		default:
			check(cmp == 0 && !ok, "Compare of diverged sets")
		}

		ca, cb, cu, cd, ci := a.Count(), b.Count(), union.Count(), diff.Count(), inter.Count()
		// Each identity is written so that no intermediate value can wrap.
		if ca != math.MaxUint64 && cb != math.MaxUint64 && cu != math.MaxUint64 {
			check(cu >= ca && cu >= cb && cd <= ca && ci <= ca && ci <= cb, "count monotonic")
			check(ca-ci == cd, "|a| − |a∩b| = |a−b|")
			check(cu-cb == cd, "|a∪b| − |b| = |a−b|")
		}
	})
}
