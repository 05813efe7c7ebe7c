package salvage

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// Want selects the transactions to save, by GTID.
type Want func(g gtid.MariaDBGTID) bool

// serverKey is one (domain, server_id) pair of a gtid_binlog_state.
type serverKey struct{ domain, server uint32 }

// NotIn selects the transactions the leader lacks, judged by the leader's
// @@gtid_binlog_state ("d-s-n,d-s-n,...", the last seq_no each server_id
// logged in each domain). A transaction d-s-n is extra unless the state has
// d-s-m with m >= n.
//
// Comparing per server_id, not per domain as a position would, is what
// catches a fork: with the leader at "0-1-5,0-2-7", the member's 0-1-6 is
// extra although 7 > 6, because server 1 stopped at 5 in the leader's
// history.
func NotIn(leaderBinlogState string) (Want, error) {
	last := map[serverKey]uint64{}
	if strings.TrimSpace(leaderBinlogState) != "" {
		for i, part := range strings.Split(leaderBinlogState, ",") {
			pos, err := gtid.ParseMariaDBPos(part)
			if err != nil {
				return nil, fmt.Errorf("leader gtid_binlog_state, entry %d: %w", i+1, err)
			}
			gs := pos.GTIDs()
			if len(gs) == 0 {
				return nil, fmt.Errorf("leader gtid_binlog_state %q: entry %d is empty; want domain-server-seq entries separated by ','",
					leaderBinlogState, i+1)
			}
			k := serverKey{gs[0].Domain, gs[0].ServerID}
			if _, dup := last[k]; dup {
				return nil, fmt.Errorf("leader gtid_binlog_state %q: domain %d, server_id %d appears twice; "+
					"pass @@gtid_binlog_state, not a list of positions", leaderBinlogState, k.domain, k.server)
			}
			last[k] = gs[0].Seq
		}
	}
	return func(g gtid.MariaDBGTID) bool {
		m, ok := last[serverKey{g.Domain, g.ServerID}]
		return !ok || m < g.Seq
	}, nil
}

// summarize describes gtids compactly for logs and file headers: per
// (domain, server_id), in that order, the first and last GTID and how many,
// e.g. "0-1-6..0-1-9 (4), 0-3-2 (1)". "" for none.
func summarize(gtids []gtid.MariaDBGTID) string {
	type span struct {
		first, last gtid.MariaDBGTID
		n           int
	}
	spans := map[serverKey]*span{}
	var keys []serverKey
	for _, g := range gtids {
		k := serverKey{g.Domain, g.ServerID}
		s, ok := spans[k]
		if !ok {
			s = &span{first: g}
			spans[k] = s
			keys = append(keys, k)
		}
		s.last = g
		s.n++
	}
	slices.SortFunc(keys, func(a, b serverKey) int {
		return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.server, b.server))
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		s := spans[k]
		parts[i] = s.first.String()
		if s.n > 1 {
			parts[i] += ".." + s.last.String()
		}
		parts[i] += " (" + strconv.Itoa(s.n) + ")"
	}
	return strings.Join(parts, ", ")
}
