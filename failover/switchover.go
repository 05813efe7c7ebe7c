package failover

import (
	"fmt"

	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// SwitchoverMaxBehind is how many of our transactions a switchover target
// may not have applied yet when the leader is about to stop writes for it.
//
// Writes stay stopped until the target has applied every one of them, and
// the hand-over waits for that no longer than the lock deadline leaves
// (with the default timings ttl - safety_margin - 2*retry_timeout = 2 s). A
// single SQL thread applying small durable transactions manages some 500 to
// a few thousand a second, so 1,000 is what a slow one applies within that
// wait, and costs a fast one a fraction of a second of stopped writes. A
// target further behind would keep writes stopped for seconds, then most
// likely miss the wait and have stopped them for nothing.
const SwitchoverMaxBehind = 1000

// switchoverBlocked says why the leader should not stop writes to hand the
// lock to target, judged from the snapshot before any fence; "" when it
// may. The count is of transactions the target has not executed (not its
// retrieved set): applying is what the hand-over waits for, and a stopped
// or slow applier leaves a relay log full of received transactions. An
// allowLag request (agentctl switchover --allow-lag) skips the check.
func switchoverBlocked(s Snapshot, target Member, allowLag bool) string {
	if allowLag {
		return ""
	}
	self, _ := find(s.Members, s.Self)
	behind, err := transactionsBehind(s.Flavor, target.Executed, self.Executed)
	if err != nil {
		return fmt.Sprintf("switchover target %s: cannot tell how far behind %s it is (%v); retry, or use --allow-lag", target.Name, s.Self, err)
	}
	if behind > SwitchoverMaxBehind {
		return fmt.Sprintf("switchover target %s has not applied %d of %s's transactions (limit %d): writes would stop "+
			"until it has; wait until it catches up and retry, or use --allow-lag to stop writes and wait for it",
			target.Name, behind, s.Self, SwitchoverMaxBehind)
	}
	return ""
}

// transactionsBehind counts the transactions of ours (executed set) that
// theirs lacks.
func transactionsBehind(flavor gtid.Flavor, theirs, ours string) (uint64, error) {
	t, err := gtid.ParseHistory(flavor, theirs, "")
	if err != nil {
		return 0, fmt.Errorf("the target's GTIDs: %w", err)
	}
	o, err := gtid.ParseHistory(flavor, ours, "")
	if err != nil {
		return 0, fmt.Errorf("our GTIDs: %w", err)
	}
	return t.Missing(o), nil
}
