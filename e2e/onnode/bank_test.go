package onnode

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
	"github.com/mysqlha/mysqlha/e2e/realnode"
)

// bankInitial: the accounts ensureApp opens, once per cluster. Every
// transfer since is in app.transfers, so any member's balances can be
// checked against its own log.
var bankInitial = map[int]int64{1: 1000, 2: 1000, 3: 1000, 4: 1000, 5: 1000}

const bankSchema = "CREATE TABLE IF NOT EXISTS app.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL); " +
	"INSERT IGNORE INTO app.accounts VALUES (1, 1000), (2, 1000), (3, 1000), (4, 1000), (5, 1000); " +
	"CREATE TABLE IF NOT EXISTS app.transfers (id BIGINT PRIMARY KEY, src INT NOT NULL, dst INT NOT NULL, amount BIGINT NOT NULL); "

// bank moves money between the accounts through the primary Service, one
// transaction a transfer: debit, credit and the log row commit together
// or not at all. It records the transfers acknowledged by their COMMIT.
type bank struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu    sync.Mutex
	acked []checker.Transfer
}

func (c *cluster) startBank(firstID int64) *bank {
	b := &bank{stop: make(chan struct{}), done: make(chan struct{})}
	db := c.open(c.primaryIP)
	go func() {
		defer close(b.done)
		defer db.Close()
		for id := firstID; ; id++ {
			select {
			case <-b.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			from := 1 + rand.IntN(len(bankInitial))
			to := 1 + (from+rand.IntN(len(bankInitial)-1))%len(bankInitial)
			t := checker.Transfer{ID: id, From: from, To: to, Amount: 1 + rand.Int64N(50)}
			if transfer(db, t) == nil {
				b.mu.Lock()
				b.acked = append(b.acked, t)
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func transfer(db *sql.DB, t checker.Transfer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, st := range []struct {
		q    string
		args []any
	}{
		{"UPDATE accounts SET balance = balance - ? WHERE id = ?", []any{t.Amount, t.From}},
		{"UPDATE accounts SET balance = balance + ? WHERE id = ?", []any{t.Amount, t.To}},
		{"INSERT INTO transfers (id, src, dst, amount) VALUES (?, ?, ?, ?)", []any{t.ID, t.From, t.To, t.Amount}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Stop ends the transfers (later calls just return) and returns the
// acknowledged ones.
func (b *bank) Stop() []checker.Transfer {
	b.stopOnce.Do(func() { close(b.stop) })
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.acked)
}

// ledgers reads every member's bank through its socket (so no network
// fault hides one): balances, the transfer log, and the tables' checksums.
func (c *cluster) ledgers(ctx context.Context) ([]checker.Ledger, error) {
	var out []checker.Ledger
	for _, name := range members {
		l, err := c.ledger(ctx, name)
		if err != nil {
			return out, fmt.Errorf("reading %s's bank: %w", name, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func (c *cluster) ledger(ctx context.Context, name string) (checker.Ledger, error) {
	p, err := c.views().pods.Get(name)
	if err != nil {
		return checker.Ledger{}, err
	}
	pid, err := realnode.ContainerPIDOf(p, "mariadb")
	if err != nil {
		return checker.Ledger{}, err
	}
	db := openSocket(pid, 10*time.Second)
	defer db.Close()
	l := checker.Ledger{Member: name, Primary: p.Labels[roleLabel] == "primary", Balances: map[int]int64{}, Log: map[int64]checker.Transfer{}}
	err = eachRow(ctx, db, "SELECT id, balance FROM app.accounts", func(rs *sql.Rows) error {
		var id int
		var balance int64
		err := rs.Scan(&id, &balance)
		l.Balances[id] = balance
		return err
	})
	if err == nil {
		err = eachRow(ctx, db, "SELECT id, src, dst, amount FROM app.transfers", func(rs *sql.Rows) error {
			var t checker.Transfer
			err := rs.Scan(&t.ID, &t.From, &t.To, &t.Amount)
			l.Log[t.ID] = t
			return err
		})
	}
	if err == nil {
		var sums []string
		err = eachRow(ctx, db, "CHECKSUM TABLE app.accounts, app.transfers", func(rs *sql.Rows) error {
			var table string
			var sum sql.NullInt64
			err := rs.Scan(&table, &sum)
			sums = append(sums, fmt.Sprintf("%s=%d", strings.TrimPrefix(table, "app."), sum.Int64))
			return err
		})
		l.Checksum = strings.Join(sums, " ")
	}
	return l, err
}

func eachRow(ctx context.Context, db *sql.DB, query string, scan func(*sql.Rows) error) error {
	rs, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		if err := scan(rs); err != nil {
			return err
		}
	}
	return rs.Err()
}
