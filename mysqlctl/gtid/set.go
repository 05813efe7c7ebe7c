package gtid

import (
	"slices"
	"strconv"
	"strings"
)

// Set is a MySQL GTID set: for each source (server UUID, optionally with a
// MySQL 8.4 tag) the set of transaction numbers executed.
//
// Set is immutable; the zero value is the empty set. Compare Sets with
// [Set.Equal] or [Set.Compare].
type Set struct {
	// groups is sorted by (uuid, tag), has no duplicate keys, and every
	// group's intervals are non-empty and normalised. All constructors
	// maintain this, which is what makes the linear merges below correct.
	groups []group
}

// tsid identifies a transaction source: MySQL's "tagged source id".
// uuid is lowercase 8-4-4-4-12 hex; tag is lowercase, "" for untagged.
type tsid struct{ uuid, tag string }

func (k tsid) compare(o tsid) int {
	if c := strings.Compare(k.uuid, o.uuid); c != 0 {
		return c
	}
	return strings.Compare(k.tag, o.tag)
}

type group struct {
	key tsid
	ivs []interval
}

// IsEmpty reports whether s contains no transactions.
func (s Set) IsEmpty() bool { return len(s.groups) == 0 }

// Count returns the number of transactions in s, saturating at
// math.MaxUint64 (a set may hold up to 2^63-1 transactions per source).
func (s Set) Count() uint64 {
	var n uint64
	for _, g := range s.groups {
		for _, iv := range g.ivs {
			n = addSaturating(n, iv.count())
		}
	}
	return n
}

// Equal reports whether s and o contain exactly the same transactions.
func (s Set) Equal(o Set) bool {
	return slices.EqualFunc(s.groups, o.groups, func(a, b group) bool {
		return a.key == b.key && slices.Equal(a.ivs, b.ivs)
	})
}

// Union returns s ∪ o.
func (s Set) Union(o Set) Set {
	return s.combine(o, true, true, unionIntervals)
}

// Subtract returns s − o: the transactions in s that are not in o.
func (s Set) Subtract(o Set) Set {
	return s.combine(o, true, false, subtractIntervals)
}

// Intersect returns s ∩ o.
func (s Set) Intersect(o Set) Set {
	return s.combine(o, false, false, intersectIntervals)
}

// combine merge-joins the sorted groups of s and o. Groups present on only one
// side are copied to the result when keepOnlyS / keepOnlyO say so; groups
// present on both are combined with op. Empty results are dropped so the
// invariant "every group is non-empty" holds.
func (s Set) combine(o Set, keepOnlyS, keepOnlyO bool, op func(a, b []interval) []interval) Set {
	var out []group
	i, j := 0, 0
	for i < len(s.groups) || j < len(o.groups) {
		var c int
		switch {
		case i == len(s.groups):
			c = 1
		case j == len(o.groups):
			c = -1
		default:
			c = s.groups[i].key.compare(o.groups[j].key)
		}
		switch {
		case c < 0:
			if keepOnlyS {
				out = append(out, s.groups[i])
			}
			i++
		case c > 0:
			if keepOnlyO {
				out = append(out, o.groups[j])
			}
			j++
		default:
			if ivs := op(s.groups[i].ivs, o.groups[j].ivs); len(ivs) > 0 {
				out = append(out, group{s.groups[i].key, ivs})
			}
			i++
			j++
		}
	}
	return Set{groups: out}
}

// Contains reports whether o ⊆ s, i.e. s has executed every transaction in o.
func (s Set) Contains(o Set) bool {
	i := 0
	for _, og := range o.groups {
		for i < len(s.groups) && s.groups[i].key.compare(og.key) < 0 {
			i++
		}
		if i == len(s.groups) || s.groups[i].key != og.key || !containsIntervals(s.groups[i].ivs, og.ivs) {
			return false
		}
	}
	return true
}

// Compare orders s and o by inclusion, for ranking failover candidates:
// +1 if s strictly contains o, -1 if o strictly contains s, 0 if equal.
// ok is false (and cmp 0) when neither contains the other: each has
// transactions the other lacks, so the two have diverged.
func (s Set) Compare(o Set) (cmp int, ok bool) {
	return compareByContainment(s.Contains(o), o.Contains(s))
}

func compareByContainment(sHasO, oHasS bool) (cmp int, ok bool) {
	switch {
	case sHasO && oHasS:
		return 0, true
	case sHasO:
		return 1, true
	case oHasS:
		return -1, true
	}
	return 0, false
}

// String returns the canonical MySQL spelling of s: UUIDs lowercase and
// sorted, each UUID's untagged intervals first and then its tags in sorted
// order, intervals merged and ascending, "N" for single transactions, no
// whitespace; "" for the empty set. Example:
//
//	3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7:blue:1-3,4e11fa47-71ca-11e1-9e33-c80aa9429562:1
func (s Set) String() string {
	var b strings.Builder
	for i, g := range s.groups {
		if i == 0 || g.key.uuid != s.groups[i-1].key.uuid {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(g.key.uuid)
		}
		if g.key.tag != "" {
			b.WriteByte(':')
			b.WriteString(g.key.tag)
		}
		for _, iv := range g.ivs {
			b.WriteByte(':')
			b.WriteString(strconv.FormatUint(iv.start, 10))
			if iv.end != iv.start {
				b.WriteByte('-')
				b.WriteString(strconv.FormatUint(iv.end, 10))
			}
		}
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler using the canonical form.
func (s Set) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [ParseSet]'s rules.
func (s *Set) UnmarshalText(text []byte) error {
	parsed, err := ParseSet(string(text))
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}
