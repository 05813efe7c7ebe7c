package onnode

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// app.reg holds the register's keys; each trial uses keys of its own, so
// every key starts unwritten (it reads 0). nreads counts the reads that
// locked a row.
const registerSchema = "CREATE TABLE IF NOT EXISTS app.reg (k BIGINT PRIMARY KEY, v BIGINT NOT NULL, nreads BIGINT NOT NULL DEFAULT 0); "

const (
	registerClients = 2
	registerKeys    = 3
)

// register runs clients that read and write a few keys through the primary
// Service and record every operation with its invocation and return.
//
// What a read through the primary Service can promise: a plain SELECT may
// reach a fenced old primary through an endpoint kube-proxy has not yet
// dropped, and a fenced server still answers reads, from before the new
// primary's writes. So a read here is a transaction that also writes (it
// locks the key's row with an upsert, then reads it): it commits only on
// the writable primary, and only one member is writable at any instant.
type register struct {
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu  sync.Mutex
	ops []checker.RegisterOp
}

func (c *cluster) startRegister(keyBase int64) *register {
	r := &register{stop: make(chan struct{})}
	var next atomic.Int64 // written values are unique
	for client := range registerClients {
		db := c.open(c.primaryIP)
		r.wg.Go(func() {
			defer db.Close()
			for {
				select {
				case <-r.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				op := checker.RegisterOp{Client: client, Key: keyBase + rand.Int64N(registerKeys), Write: rand.IntN(2) == 0}
				if op.Write {
					op.Value = next.Add(1)
				}
				op.Call = time.Now()
				err := registerOp(db, &op)
				op.Return = time.Now()
				if err != nil && (!op.Write || surelyNotApplied(err)) {
					// Nothing happened; back off while the primary is away.
					time.Sleep(100 * time.Millisecond)
					continue
				}
				op.Failed = err != nil
				r.mu.Lock()
				r.ops = append(r.ops, op)
				r.mu.Unlock()
			}
		})
	}
	return r
}

func registerOp(db *sql.DB, op *checker.RegisterOp) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if op.Write {
		_, err := db.ExecContext(ctx, "INSERT INTO reg (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)", op.Key, op.Value)
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO reg (k, v, nreads) VALUES (?, 0, 1) ON DUPLICATE KEY UPDATE nreads = nreads + 1", op.Key); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, "SELECT v FROM reg WHERE k = ? FOR UPDATE", op.Key).Scan(&op.Value); err != nil {
		return err
	}
	return tx.Commit()
}

// surelyNotApplied: the write was refused by a read-only server (error
// 1290), or the connection was never made. Any other error (a timeout, a
// session killed by the fence, possibly after its commit) leaves the write
// possibly applied.
func surelyNotApplied(err error) bool {
	var me *mysql.MySQLError
	var ne *net.OpError
	return errors.As(err, &me) && me.Number == 1290 || errors.As(err, &ne) && ne.Op == "dial"
}

// Stop ends the clients (later calls just return) and returns the history.
func (r *register) Stop() []checker.RegisterOp {
	r.stopOnce.Do(func() { close(r.stop) })
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}
