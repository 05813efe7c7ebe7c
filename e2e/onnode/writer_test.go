package onnode

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/e2e/checker"
)

// writer inserts one row after another through the primary Service's
// ClusterIP, as an application would: each insert opens a connection that
// kube-proxy routes to the current endpoint, and a failed insert is simply
// retried with the next id. It records every acknowledged id with its time.
type writer struct {
	db       *sql.DB
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu     sync.Mutex
	acked  []int64
	at     []time.Time
	failed int
}

func (c *cluster) startWriter(firstID int64) *writer {
	w := &writer{db: c.open(c.primaryIP), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer w.db.Close()
		for id := firstID; ; id++ {
			select {
			case <-w.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := w.db.ExecContext(ctx, "INSERT INTO w (id) VALUES (?)", id)
			cancel()
			if err == nil {
				w.record(id)
			} else {
				w.mu.Lock()
				w.failed++
				w.mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return w
}

// record adds an acknowledged write, now (also for writes made beside
// the writer's own loop).
func (w *writer) record(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acked, w.at = append(w.acked, id), append(w.at, time.Now())
}

// Stop ends the writer (later calls just return) and returns the
// acknowledged ids.
func (w *writer) Stop() []int64 {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acked)
}

// writes returns the acknowledged writes with their times.
func (w *writer) writes() []checker.Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]checker.Write, len(w.acked))
	for i := range w.acked {
		out[i] = checker.Write{ID: w.acked[i], At: w.at[i]}
	}
	return out
}

// firstAckAfter is the time of the first acknowledgement after t; zero if none.
func (w *writer) firstAckAfter(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.at {
		if a.After(t) {
			return a
		}
	}
	return time.Time{}
}

// longestGap is the longest time between two acknowledgements.
func (w *writer) longestGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(w.at); i++ {
		gap = max(gap, w.at[i].Sub(w.at[i-1]))
	}
	return gap
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}
