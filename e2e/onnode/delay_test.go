package onnode

import (
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// 500 ms of delay on every packet the primary sends, for 20 s: its lock
// renewals, its replicas' streams and its answers to clients all take at
// least half a second more. A renewal is bounded by retry_timeout (1 s by
// default) and may take more than one round trip, so the lock may move (it
// did here): the scenario promises safety and a bounded outage, not who
// leads.
func TestPrimaryDelayed(t *testing.T) {
	scenario{
		name:   "500 ms of delay on the primary",
		leader: anyLeader,
		hold:   20 * time.Second,
		inject: func(tr *trial) error {
			ns, err := tr.netns(tr.primary)
			if err != nil {
				return err
			}
			_, err = tr.faults.Delay(ns, 1, 500*time.Millisecond)
			return err
		},
		expect: checker.Expect{MaxOutage: 30 * time.Second},
		target: 8 * time.Second,
	}.run(t)
}
