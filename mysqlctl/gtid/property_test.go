package gtid

import (
	"fmt"
	"math/bits"
	"math/rand"
	"strings"
	"testing"
)

// The property tests compare Set against a naive model: per source, a
// bitmap of transaction numbers 1..64. Random sets are built as strings in
// deliberately messy spellings (mixed case, unsorted, overlapping, repeated
// sources, ",\n" separators) so the parser is exercised along the way.

type modelSet map[tsid]uint64 // bit gno-1 set <=> transaction gno present

const modelMaxGNO = 64

var modelSources = []tsid{
	{u1, ""}, {u1, "t"}, {u1, "zz"}, {u2, ""}, {u3, ""}, {u3, "a"},
}

func (m modelSet) normalized() modelSet {
	out := modelSet{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func (m modelSet) equal(o modelSet) bool {
	m, o = m.normalized(), o.normalized()
	if len(m) != len(o) {
		return false
	}
	for k, v := range m {
		if o[k] != v {
			return false
		}
	}
	return true
}

func (m modelSet) count() uint64 {
	var n uint64
	for _, v := range m {
		n += uint64(bits.OnesCount64(v))
	}
	return n
}

func modelBinary(a, b modelSet, op func(x, y uint64) uint64) modelSet {
	out := modelSet{}
	for _, k := range modelSources {
		out[k] = op(a[k], b[k])
	}
	return out.normalized()
}

func modelContains(a, b modelSet) bool {
	for k, v := range b {
		if v&^a[k] != 0 {
			return false
		}
	}
	return true
}

// toModel converts a Set whose transaction numbers are all <= 64.
func toModel(t *testing.T, s Set) modelSet {
	t.Helper()
	m := modelSet{}
	for _, g := range s.groups {
		for _, iv := range g.ivs {
			if iv.end > modelMaxGNO {
				t.Fatalf("interval %v outside model range", iv)
			}
			for n := iv.start; n <= iv.end; n++ {
				m[g.key] |= 1 << (n - 1)
			}
		}
	}
	return m
}

// randomSet returns a messy spelling of a random set and its model.
func randomSet(rng *rand.Rand) (string, modelSet) {
	m := modelSet{}
	var groups []string
	for range rng.Intn(5) {
		src := modelSources[rng.Intn(len(modelSources))]
		uuid := src.uuid
		if rng.Intn(2) == 0 {
			uuid = strings.ToUpper(uuid)
		}
		var b strings.Builder
		b.WriteString(uuid)
		tag := ""
		nIntervals := 1 + rng.Intn(4)
		for i := range nIntervals {
			// Switch to the source's tag partway through, as MySQL 8.4
			// allows: "uuid:1-3:tag:5".
			if src.tag != "" && tag == "" && (i == nIntervals-1 || rng.Intn(2) == 0) {
				tag = src.tag
				if rng.Intn(2) == 0 {
					tag = strings.ToUpper(tag)
				}
				b.WriteString(":" + tag)
			}
			key := tsid{src.uuid, strings.ToLower(tag)}
			start := 1 + rng.Intn(modelMaxGNO)
			end := start
			if rng.Intn(3) > 0 {
				end = start + rng.Intn(modelMaxGNO-start+1)
			}
			if start == end && rng.Intn(2) == 0 {
				fmt.Fprintf(&b, ":%d", start)
			} else {
				fmt.Fprintf(&b, ":%d-%d", start, end)
			}
			for n := start; n <= end; n++ {
				m[key] |= 1 << (n - 1)
			}
		}
		groups = append(groups, b.String())
	}
	seps := []string{",", ",\n", ", ", " ,\t"}
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteString(seps[rng.Intn(len(seps))])
		}
		b.WriteString(g)
	}
	return b.String(), m.normalized()
}

func TestSetAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(20240501))
	for iter := range 3000 {
		aStr, am := randomSet(rng)
		bStr, bm := randomSet(rng)
		a, b := mustSet(t, aStr), mustSet(t, bStr)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d, a=%q b=%q: %s", iter, aStr, bStr, fmt.Sprintf(format, args...))
		}
		if got := toModel(t, a); !got.equal(am) {
			fail("parse: got %v, model %v", got, am)
		}
		if again := mustSet(t, a.String()); !again.Equal(a) || again.String() != a.String() {
			fail("canonical form %q does not round-trip", a)
		}
		if a.Count() != am.count() {
			fail("Count = %d, model %d", a.Count(), am.count())
		}

		union := a.Union(b)
		checkSetInvariant(t, union)
		if want := modelBinary(am, bm, func(x, y uint64) uint64 { return x | y }); !toModel(t, union).equal(want) {
			fail("Union = %q", union)
		}
		diff := a.Subtract(b)
		checkSetInvariant(t, diff)
		if want := modelBinary(am, bm, func(x, y uint64) uint64 { return x &^ y }); !toModel(t, diff).equal(want) {
			fail("Subtract = %q", diff)
		}
		inter := a.Intersect(b)
		checkSetInvariant(t, inter)
		if want := modelBinary(am, bm, func(x, y uint64) uint64 { return x & y }); !toModel(t, inter).equal(want) {
			fail("Intersect = %q", inter)
		}
		if got, want := a.Contains(b), modelContains(am, bm); got != want {
			fail("Contains = %v, model %v", got, want)
		}
		if got, want := a.Equal(b), am.equal(bm); got != want {
			fail("Equal = %v, model %v", got, want)
		}
		aHasB, bHasA := modelContains(am, bm), modelContains(bm, am)
		cmp, ok := a.Compare(b)
		switch {
		case aHasB && bHasA:
			if cmp != 0 || !ok {
				fail("Compare = (%d, %v), want (0, true)", cmp, ok)
			}
		case aHasB:
			if cmp != 1 || !ok {
				fail("Compare = (%d, %v), want (1, true)", cmp, ok)
			}
		case bHasA:
			if cmp != -1 || !ok {
				fail("Compare = (%d, %v), want (-1, true)", cmp, ok)
			}
		default:
			if cmp != 0 || ok {
				fail("Compare = (%d, %v), want (0, false)", cmp, ok)
			}
		}
		if got, want := ErrantMySQL(a, b).IsEmpty(), modelContains(bm, am); got != want {
			fail("ErrantMySQL empty = %v, model %v", got, want)
		}
	}
}

// randomPos returns a MariaDB position over domains 0..3, servers 1..3 and
// seq_no 0..6: small ranges so equal seq_nos and forks are common.
func randomPos(rng *rand.Rand) MariaDBPos {
	var gtids []MariaDBGTID
	for d := range uint32(4) {
		if rng.Intn(3) == 0 {
			continue
		}
		gtids = append(gtids, MariaDBGTID{Domain: d, ServerID: uint32(1 + rng.Intn(3)), Seq: uint64(rng.Intn(7))})
	}
	// Build through the parser, in shuffled order, to exercise it too.
	rng.Shuffle(len(gtids), func(i, j int) { gtids[i], gtids[j] = gtids[j], gtids[i] })
	parts := make([]string, len(gtids))
	for i, g := range gtids {
		parts[i] = g.String()
	}
	p, err := ParseMariaDBPos(strings.Join(parts, ", "))
	if err != nil {
		panic(err)
	}
	return p
}

// modelHas is the spec of "p has executed g" spelled out independently.
func modelHas(p MariaDBPos, g MariaDBGTID) bool {
	for _, mine := range p.GTIDs() {
		if mine.Domain != g.Domain {
			continue
		}
		if mine.Seq > g.Seq {
			return true
		}
		return mine.Seq == g.Seq && (mine.ServerID == g.ServerID || g.Seq == 0)
	}
	return g.Seq == 0
}

func TestMariaDBPosProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for iter := range 3000 {
		a, b := randomPos(rng), randomPos(rng)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d, a=%q b=%q: %s", iter, a, b, fmt.Sprintf(format, args...))
		}
		checkPosInvariant(t, a)
		if again := mustPos(t, a.String()); !again.Equal(a) {
			fail("round trip gave %q", again)
		}

		wantContains := true
		var wantErrant []MariaDBGTID
		for _, g := range b.GTIDs() {
			if !modelHas(a, g) {
				wantContains = false
			}
		}
		for _, g := range a.GTIDs() {
			if !modelHas(b, g) {
				wantErrant = append(wantErrant, g)
			}
		}
		if a.Contains(b) != wantContains {
			fail("Contains = %v, want %v", a.Contains(b), wantContains)
		}
		errant := ErrantMariaDB(a, b)
		if got, want := errant.String(), (MariaDBPos{gtids: wantErrant}).String(); got != want {
			fail("ErrantMariaDB = %q, want %q", got, want)
		}
		if errant.IsEmpty() != b.Contains(a) {
			fail("errant empty = %v but b.Contains(a) = %v", errant.IsEmpty(), b.Contains(a))
		}

		cmp, ok := a.Compare(b)
		rcmp, rok := b.Compare(a)
		if ok != rok || cmp != -rcmp {
			fail("Compare not antisymmetric: (%d,%v) vs (%d,%v)", cmp, ok, rcmp, rok)
		}
		if a.Equal(b) && (cmp != 0 || !ok) {
			fail("equal positions compare as (%d, %v)", cmp, ok)
		}

		// Behind: per-domain deficit, independent of server ids.
		var wantBehind uint64
		for _, g := range b.GTIDs() {
			mine, _ := a.Seq(g.Domain)
			if g.Seq > mine {
				wantBehind += g.Seq - mine
			}
		}
		if a.Behind(b) != wantBehind {
			fail("Behind = %d, want %d", a.Behind(b), wantBehind)
		}
		if a.Contains(b) && a.Behind(b) != 0 {
			fail("a contains b but is %d behind", a.Behind(b))
		}

		m := a.Merge(b)
		checkPosInvariant(t, m)
		for _, d := range append(a.Domains(), b.Domains()...) {
			as, _ := a.Seq(d)
			bs, _ := b.Seq(d)
			if ms, ok := m.Seq(d); !ok || ms != max(as, bs) {
				fail("Merge seq for domain %d = %d, want %d", d, ms, max(as, bs))
			}
		}
		if len(m.Domains()) != len(union(a.Domains(), b.Domains())) {
			fail("Merge domains = %v", m.Domains())
		}
		if m.Behind(a) != 0 || m.Behind(b) != 0 {
			fail("Merge is behind an input")
		}
		if !m.Contains(a) {
			fail("Merge does not contain its receiver")
		}
		if !a.Merge(a).Equal(a) || !m.Merge(b).Equal(m) || !m.Merge(a).Equal(m) {
			fail("Merge not idempotent")
		}
		// Merge contains b too unless the two forked (equal seq_no, different
		// server), where the receiver's GTID is kept.
		if _, ok := a.Compare(b); ok && !m.Contains(b) {
			fail("Merge of ordered positions does not contain both")
		}
	}
}

func union(a, b []uint32) map[uint32]bool {
	out := map[uint32]bool{}
	for _, d := range append(a, b...) {
		out[d] = true
	}
	return out
}
