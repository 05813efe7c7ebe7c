package gtid

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MariaDBGTID is one MariaDB GTID, domain-server-seq: the seq_no-th
// transaction of replication domain Domain, written by server ServerID.
type MariaDBGTID struct {
	Domain   uint32
	ServerID uint32
	Seq      uint64
}

func (g MariaDBGTID) String() string {
	return strconv.FormatUint(uint64(g.Domain), 10) + "-" +
		strconv.FormatUint(uint64(g.ServerID), 10) + "-" +
		strconv.FormatUint(g.Seq, 10)
}

// MariaDBPos is a MariaDB GTID position (@@gtid_current_pos, @@gtid_slave_pos,
// Gtid_IO_Pos): the last GTID applied in each replication domain. Within a
// domain, seq_no grows monotonically under gtid_strict_mode, so the last GTID
// implies all earlier ones; the comparisons below rely on that.
//
// MariaDBPos is immutable; the zero value is the empty position.
type MariaDBPos struct {
	gtids []MariaDBGTID // sorted by Domain, one entry per domain
}

// ParseMariaDBPos parses a comma-separated list of domain-server-seq GTIDs
// such as "0-1-100,1-2-5". The empty string (or only whitespace) is the empty
// position; whitespace is allowed at the ends and around commas. Domain and
// server_id must fit in uint32 and seq_no in uint64. Two GTIDs for the same
// domain, empty list elements, signs and leading zeros are rejected with a
// [*ParseError].
func ParseMariaDBPos(in string) (MariaDBPos, error) {
	fail := func(pos int, format string, args ...any) error {
		return &ParseError{Input: in, Pos: pos, Reason: fmt.Sprintf(format, args...), Flavor: MariaDB}
	}
	number := func(pos int, what string, limit uint64) (uint64, int, error) {
		v, end, reason := parseDecimal(in, pos, limit)
		if reason != "" {
			return 0, pos, fail(pos, "%s %s", what, reason)
		}
		return v, end, nil
	}
	dash := func(pos int, after string) (int, error) {
		if pos == len(in) || in[pos] != '-' {
			if pos == len(in) {
				return pos, fail(pos, "GTID ends after %s", after)
			}
			return pos, fail(pos, "unexpected %s after %s; want '-'", charAt(in, pos), after)
		}
		return pos + 1, nil
	}

	var gtids []MariaDBGTID
	firstSeen := map[uint32]int{} // domain -> byte offset, for the duplicate message
	pos := skipSpace(in, 0)
	for pos < len(in) {
		start := pos
		if in[pos] == ',' {
			return MariaDBPos{}, fail(pos, "empty GTID before ','")
		}
		var domain, server, seq uint64
		var err error
		if domain, pos, err = number(pos, "domain", math.MaxUint32); err != nil {
			return MariaDBPos{}, err
		}
		if pos, err = dash(pos, "domain"); err != nil {
			return MariaDBPos{}, err
		}
		if server, pos, err = number(pos, "server_id", math.MaxUint32); err != nil {
			return MariaDBPos{}, err
		}
		if pos, err = dash(pos, "server_id"); err != nil {
			return MariaDBPos{}, err
		}
		if seq, pos, err = number(pos, "seq_no", math.MaxUint64); err != nil {
			return MariaDBPos{}, err
		}
		if prev, dup := firstSeen[uint32(domain)]; dup {
			return MariaDBPos{}, fail(start, "duplicate domain %d (first at byte %d)", domain, prev)
		}
		firstSeen[uint32(domain)] = start
		gtids = append(gtids, MariaDBGTID{Domain: uint32(domain), ServerID: uint32(server), Seq: seq})

		pos = skipSpace(in, pos)
		if pos == len(in) {
			break
		}
		if in[pos] != ',' {
			return MariaDBPos{}, fail(pos, "unexpected %s after seq_no; GTIDs are separated by ','", charAt(in, pos))
		}
		comma := pos
		if pos = skipSpace(in, pos+1); pos == len(in) {
			return MariaDBPos{}, fail(comma, "trailing ','")
		}
	}
	slices.SortFunc(gtids, func(a, b MariaDBGTID) int { return cmp.Compare(a.Domain, b.Domain) })
	return MariaDBPos{gtids: gtids}, nil
}

// String returns the canonical form: GTIDs sorted by domain, joined by ','
// without spaces; "" for the empty position.
func (p MariaDBPos) String() string {
	var b strings.Builder
	for i, g := range p.gtids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(g.String())
	}
	return b.String()
}

// IsEmpty reports whether p has no domains.
func (p MariaDBPos) IsEmpty() bool { return len(p.gtids) == 0 }

// Domains returns p's domains in ascending order.
func (p MariaDBPos) Domains() []uint32 {
	out := make([]uint32, len(p.gtids))
	for i, g := range p.gtids {
		out[i] = g.Domain
	}
	return out
}

// GTIDs returns p's GTIDs sorted by domain.
func (p MariaDBPos) GTIDs() []MariaDBGTID { return slices.Clone(p.gtids) }

// GTID returns p's GTID for domain, if p has one.
func (p MariaDBPos) GTID(domain uint32) (MariaDBGTID, bool) {
	i, found := slices.BinarySearchFunc(p.gtids, domain, func(g MariaDBGTID, d uint32) int {
		return cmp.Compare(g.Domain, d)
	})
	if !found {
		return MariaDBGTID{}, false
	}
	return p.gtids[i], true
}

// Seq returns p's seq_no for domain, if p has the domain.
func (p MariaDBPos) Seq(domain uint32) (uint64, bool) {
	g, ok := p.GTID(domain)
	return g.Seq, ok
}

// seq returns p's seq_no for domain, 0 (no transactions) when absent.
func (p MariaDBPos) seq(domain uint32) uint64 {
	s, _ := p.Seq(domain)
	return s
}

// has reports whether p has executed g: p's seq_no in g's domain is higher,
// or equal and written by the same server. An equal seq_no from a different
// server is a different transaction (the histories forked), not g. seq_no 0
// denotes no transaction and is always had.
func (p MariaDBPos) has(g MariaDBGTID) bool {
	if g.Seq == 0 {
		return true
	}
	mine, ok := p.GTID(g.Domain)
	return ok && (mine.Seq > g.Seq || (mine.Seq == g.Seq && mine.ServerID == g.ServerID))
}

// Equal reports whether p and o hold exactly the same GTIDs, server_ids
// included.
func (p MariaDBPos) Equal(o MariaDBPos) bool { return slices.Equal(p.gtids, o.gtids) }

// Contains reports whether p has executed everything o has: for every domain
// of o, p's seq_no is higher, or equal with the same server_id. (Equal seq_no
// with a different server_id means the two histories forked at that
// transaction, so neither contains the other.) A domain at seq_no 0 holds no
// transactions and is contained by anything.
func (p MariaDBPos) Contains(o MariaDBPos) bool {
	for _, g := range o.gtids {
		if !p.has(g) {
			return false
		}
	}
	return true
}

// Compare orders p and o by progress, for ranking failover candidates:
// +1 if p strictly contains o, -1 if o strictly contains p, 0 if each contains
// the other. ok is false (and cmp 0) when neither contains the other: each is
// ahead in some domain or they forked, so no order exists.
//
// cmp 0 implies Equal except for domains at seq_no 0, which count as absent.
func (p MariaDBPos) Compare(o MariaDBPos) (cmp int, ok bool) {
	return compareByContainment(p.Contains(o), o.Contains(p))
}

// Merge returns the per-domain maximum of p and o, e.g. to combine a
// replica's retrieved (Gtid_IO_Pos) and executed positions. When both have the
// same seq_no in a domain, p's GTID is kept.
func (p MariaDBPos) Merge(o MariaDBPos) MariaDBPos {
	out := make([]MariaDBGTID, 0, len(p.gtids)+len(o.gtids))
	i, j := 0, 0
	for i < len(p.gtids) || j < len(o.gtids) {
		switch {
		case j == len(o.gtids) || (i < len(p.gtids) && p.gtids[i].Domain < o.gtids[j].Domain):
			out = append(out, p.gtids[i])
			i++
		case i == len(p.gtids) || o.gtids[j].Domain < p.gtids[i].Domain:
			out = append(out, o.gtids[j])
			j++
		default:
			if o.gtids[j].Seq > p.gtids[i].Seq {
				out = append(out, o.gtids[j])
			} else {
				out = append(out, p.gtids[i])
			}
			i++
			j++
		}
	}
	return MariaDBPos{gtids: out}
}

// Behind returns how many transactions p lacks relative to o: the sum over
// o's domains of o's seq_no minus p's (a domain missing from p counts as
// seq_no 0), ignoring domains where p is ahead. The sum saturates at
// math.MaxUint64. It measures lag, not divergence: use [ErrantMariaDB] or
// Compare to detect forks.
func (p MariaDBPos) Behind(o MariaDBPos) uint64 {
	var n uint64
	for _, g := range o.gtids {
		if mine := p.seq(g.Domain); g.Seq > mine {
			n = addSaturating(n, g.Seq-mine)
		}
	}
	return n
}

// MarshalText implements encoding.TextMarshaler using the canonical form.
func (p MariaDBPos) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [ParseMariaDBPos]'s
// rules.
func (p *MariaDBPos) UnmarshalText(text []byte) error {
	parsed, err := ParseMariaDBPos(string(text))
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}
