package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Injections is the outcome of one fault-injection scenario
// (fence_under_load_test.go, duplicate_identity_test.go,
// unreachable_peers_test.go). It is printed when the test ends, passed or
// not, as one line that scripts collect across runs:
//
//	INJECTIONS scenario=<name> trials=<n> split_brain_samples=<n> acked_lost=<n> max_outage=<duration>
//
// split_brain_samples counts the instants at which e2e/checker found two
// members writable in the samples of the scenario's monitors (Monitor);
// acked_lost counts the acknowledged writes the final primary lacks, -1
// when the test ended before that was measured; max_outage is the longest
// write unavailability the scenario measured.
type Injections struct {
	Scenario string

	mu        sync.Mutex
	trials    int
	monitors  []*Monitor
	ackedLost int
	maxOutage time.Duration
}

// NewInjections registers the summary line of scenario, printed at the end
// of the test (after the monitors registered later have stopped).
func NewInjections(tb testing.TB, scenario string) *Injections {
	r := &Injections{Scenario: scenario, ackedLost: -1}
	tb.Cleanup(func() {
		line := r.String()
		tb.Log(line)
		fmt.Println(line)
	})
	return r
}

// Trial counts one injection.
func (r *Injections) Trial() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trials++
}

// Watch adds a monitor whose verdict counts.
func (r *Injections) Watch(k *Monitor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.monitors = append(r.monitors, k)
}

// Outage records a measured write unavailability.
func (r *Injections) Outage(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxOutage = max(r.maxOutage, d)
}

// AckedLost records how many acknowledged writes the final primary lacks.
func (r *Injections) AckedLost(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ackedLost = n
}

func (r *Injections) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := 0
	for _, k := range r.monitors {
		sb += k.Stop().DualWritable
	}
	return fmt.Sprintf("INJECTIONS scenario=%s trials=%d split_brain_samples=%d acked_lost=%d max_outage=%s",
		r.Scenario, r.trials, sb, r.ackedLost, r.maxOutage.Round(time.Millisecond))
}

// WaitRejoined waits until the cluster is healthy with primary leading and
// m among its streaming read-only replicas (skip: members the scenario keeps
// down), and checks that m's agent reports no errant transactions.
func (c *Cluster) WaitRejoined(timeout time.Duration, m, primary *Member, skip ...*Member) {
	c.tb.Helper()
	if p := c.WaitHealthy(timeout, skip...); p != primary {
		c.tb.Fatalf("after %s rejoined the primary is %s, want %s", m.Name, p.Name, primary.Name)
	}
	if st := m.Status(); st == nil || st.Role != "replica" || st.HoldsLock || st.Errant != "" || st.Replication != "running" {
		c.tb.Errorf("%s rejoined: /status = %s, want a streaming replica without the lock and without errant transactions", m.Name, st)
	}
}

// ExpectSameGTIDs writes a row on primary, waits for it everywhere but
// skip, and checks that every such member has the same binary log history
// as primary (@@gtid_binlog_state: the last GTID of every domain and server
// id). A member that took a transaction the primary lacks (an errant one,
// such as a write the old source took after the new primary's promotion)
// keeps a different last GTID for that server id however much it
// replicates since, so this fails whatever its agent reports.
func (c *Cluster) ExpectSameGTIDs(primary *Member, tag string, skip ...*Member) {
	c.tb.Helper()
	c.WriteAndReplicate(primary, tag, skip...)
	want, err := primary.GTIDBinlogState()
	if err != nil {
		c.tb.Fatalf("%s: reading gtid_binlog_state: %v", primary.Name, err)
	}
	for _, m := range c.Others(append(skip, primary)...) {
		waitFor(c.tb, 10*time.Second, m.Name+" to have the primary's binary log history", func() (bool, string) {
			st, err := m.GTIDBinlogState()
			return err == nil && sameGTIDSets(st, want), fmt.Sprintf("%s has gtid_binlog_state %q, the primary %s has %q (err %v)",
				m.Name, st, primary.Name, want, err)
		})
	}
}

// unreplicated lists the last GTIDs of old's binary log history
// (@@gtid_binlog_state: per domain and server id) that primary's lacks:
// transactions old committed that never reached primary. Read while old's
// agent is not running, it is the test's own verdict on whether old is
// errant.
func (c *Cluster) unreplicated(old, primary *Member) (string, error) {
	parse := func(m *Member) (map[string]int64, error) {
		st, err := m.GTIDBinlogState()
		if err != nil {
			return nil, fmt.Errorf("%s: reading gtid_binlog_state: %w", m.Name, err)
		}
		out := map[string]int64{}
		for _, g := range strings.Split(st, ",") {
			g = strings.TrimSpace(g)
			i := strings.LastIndexByte(g, '-')
			if i < 0 {
				continue
			}
			var seq int64
			if _, err := fmt.Sscan(g[i+1:], &seq); err != nil {
				return nil, fmt.Errorf("%s: gtid_binlog_state %q: %w", m.Name, st, err)
			}
			out[g[:i]] = seq
		}
		return out, nil
	}
	o, err := parse(old)
	if err != nil {
		return "", err
	}
	p, err := parse(primary)
	if err != nil {
		return "", err
	}
	var ahead []string
	for ds, seq := range o {
		if seq > p[ds] {
			ahead = append(ahead, fmt.Sprintf("%s-%d", ds, seq))
		}
	}
	return strings.Join(ahead, ","), nil
}

// GTIDBinlogState reads @@global.gtid_binlog_state (root, socket).
func (m *Member) GTIDBinlogState() (string, error) {
	ctx, cancel := ctxFor(time.Second)
	defer cancel()
	var st string
	err := m.root.QueryRowContext(ctx, "SELECT @@global.gtid_binlog_state").Scan(&st)
	return st, err
}

// sameGTIDSets compares two comma-separated GTID lists in any order.
func sameGTIDSets(a, b string) bool {
	set := func(s string) map[string]bool {
		out := map[string]bool{}
		for _, g := range strings.Split(s, ",") {
			if g = strings.TrimSpace(g); g != "" {
				out[g] = true
			}
		}
		return out
	}
	sa, sb := set(a), set(b)
	if len(sa) != len(sb) {
		return false
	}
	for g := range sa {
		if !sb[g] {
			return false
		}
	}
	return true
}
