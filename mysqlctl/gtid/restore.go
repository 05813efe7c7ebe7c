package gtid

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// RestoredBinlogState is the @@gtid_binlog_state a MariaDB member rebuilt
// from a backup taken at position pos must start with. A backup carries no
// binary logs, so the rebuilt server would know only the servers that write
// after pos; once it leads, every member that replicated an earlier
// server's transactions would look errant to it (ErrantMariaDBState: a
// server it never heard of). The donor's current state, read after the
// backup, supplies them: an entry at or below pos's seq_no in its domain
// is that server's last transaction there, then as now (seq_no grows
// within a domain). Entries above it belong to transactions after the
// backup, which the rebuilt member replicates and so records itself; pos's
// own GTIDs are added. Sorted by domain and seq_no, so that pos is each
// domain's last entry, which is what the server takes as its position.
func RestoredBinlogState(donorState, pos string) (string, error) {
	state, err := parseMariaDBState(donorState)
	if err != nil {
		return "", fmt.Errorf("donor gtid_binlog_state: %w", err)
	}
	p, err := ParseMariaDBPos(pos)
	if err != nil {
		return "", fmt.Errorf("backup position: %w", err)
	}
	out := p.GTIDs()
	for _, g := range state {
		if at, ok := p.Seq(g.Domain); ok && g.Seq < at {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b MariaDBGTID) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Seq, b.Seq))
	})
	parts := make([]string, len(out))
	for i, g := range out {
		parts[i] = g.String()
	}
	return strings.Join(parts, ","), nil
}
