package demo

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// createTable is app.drill: the rows the application user writes before
// and after the drill, each naming the server that took it.
const createTable = `CREATE TABLE IF NOT EXISTS drill (
	id INT AUTO_INCREMENT PRIMARY KEY,
	note VARCHAR(200) NOT NULL,
	written_on VARCHAR(64) NOT NULL,
	written_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`

// firstWrite creates app.drill on primary and writes its first row as the
// application user, then checks that the replicas get the row and refuse a
// write of their own (read_only).
func (d *demo) firstWrite(ctx context.Context, primary *member) error {
	d.p.start("writing a row on %s as the application user (app@%s)", primary.name, primary.addr())
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := primary.app.ExecContext(wctx, createTable); err != nil {
		return fmt.Errorf("creating app.drill on %s: %w", primary.name, err)
	}
	if _, err := primary.app.ExecContext(wctx, "INSERT INTO drill (note, written_on) VALUES (?, @@hostname)",
		"before the drill, on "+primary.name); err != nil {
		return fmt.Errorf("writing to %s: %w", primary.name, err)
	}
	d.p.done("INSERT INTO app.drill ok")

	d.p.start("checking that the replicas have it")
	var replicas []*member
	for _, m := range d.members {
		if m != primary {
			replicas = append(replicas, m)
		}
	}
	if err := d.waitRows(ctx, replicas, 1, 30*time.Second); err != nil {
		return err
	}
	// The application user is refused on replicas: read_only holds for it.
	for _, m := range replicas {
		_, err := m.app.ExecContext(wctx, "INSERT INTO drill (note, written_on) VALUES ('must fail', @@hostname)")
		if !isReadOnly(err) {
			return fmt.Errorf("a write to replica %s as the application user: want a read_only refusal, got %v", m.name, err)
		}
	}
	d.p.done("%s %s it; a write there as app is refused (read_only)", names(replicas), verb(len(replicas), "has", "have"))
	return nil
}

// rows counts app.drill on m.
func rows(ctx context.Context, m *member) (int, error) {
	var n int
	err := m.app.QueryRowContext(ctx, "SELECT COUNT(*) FROM drill").Scan(&n)
	return n, err
}

// waitRows waits up to timeout until app.drill has want rows on every
// member of ms.
func (d *demo) waitRows(ctx context.Context, ms []*member, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for _, m := range ms {
			n, err := rows(ctx, m)
			if err != nil || n != want {
				missing = append(missing, fmt.Sprintf("%s has %d (%v)", m.name, n, err))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("want %d rows in app.drill everywhere after %v: %s", want, timeout, strings.Join(missing, "; "))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}
