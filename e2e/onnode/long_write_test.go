package onnode

import (
	"context"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// A long write (20 s) is running on the primary when its agent dies: the
// split brain reproduced by hand before the fence could kill. The replica
// that takes the lock must fence the old server before the lock's
// deadline, killing the statement, and only then promote. The long write
// counts as acknowledged only if the client got its OK, and then it must
// be on the final primary.
func TestLongWriteWhileAgentDies(t *testing.T) {
	scenario{
		name:   "a long write while the primary's agent dies",
		leader: anyLeader,
		inject: func(tr *trial) error {
			id := time.Now().UnixNano()/1000 + 1<<40 // apart from the writer's ids
			started := make(chan struct{})
			go func() {
				db := tr.c.openTimeout(tr.c.primaryIP, 40*time.Second)
				defer db.Close()
				conn, err := db.Conn(context.Background())
				if err != nil {
					tr.fail("long write: connecting: %v", err)
					close(started)
					return
				}
				defer conn.Close()
				close(started)
				ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
				defer cancel()
				_, err = conn.ExecContext(ctx, "INSERT INTO w (id) SELECT ? FROM (SELECT SLEEP(20)) AS s", id)
				if err == nil {
					tr.w.record(id)
					tr.note("the long write was acknowledged")
				} else {
					tr.note("the long write failed: %v", err)
				}
			}()
			<-started
			time.Sleep(time.Second)
			tr.at = time.Now() // the fault proper: the phases count from here
			return tr.killContainer(tr.primary, "agent")
		},
		expect: checker.Expect{MaxOutage: 25 * time.Second},
	}.run(t)
}
