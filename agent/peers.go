package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/mysqlctl"
)

// peerProbe is what one attempt to observe a peer's mysqld found.
type peerProbe struct {
	db  Database // nil unless reachable
	obs mysqlctl.Observation
	// reachable: it answered. down: the connection was refused, so no
	// mysqld runs there. Neither: it did not answer in time (hung, or the
	// network is cut): unverified.
	reachable, down bool
}

// probePeers dials and observes every other member's mysqld in parallel,
// all under one bound, so that unreachable peers cost one timeout, not one
// each.
func (a *Agent) probePeers(ctx context.Context, cl *dcs.Cluster, bound time.Duration) map[string]peerProbe {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var (
		mu  sync.Mutex
		out = map[string]peerProbe{}
		wg  sync.WaitGroup
	)
	for _, m := range cl.Members {
		if m.Name == a.self.Name || m.MySQLAddr == "" || m.MySQLAddr == a.self.MySQLAddr {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := a.probePeer(ctx, m.MySQLAddr)
			mu.Lock()
			out[m.Name] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (a *Agent) probePeer(ctx context.Context, addr string) peerProbe {
	db, err := a.peerConn(ctx, addr)
	if err != nil {
		return peerProbe{down: errors.Is(err, mysqlctl.ErrDown)}
	}
	obs, err := db.Observe(ctx)
	if err != nil {
		a.dropPeer(addr)
		return peerProbe{down: errors.Is(err, mysqlctl.ErrDown)}
	}
	return peerProbe{db: db, obs: obs, reachable: true}
}

// pullingFrom is the address a replica's receiver is pulling from, "" when
// it is not receiving.
func pullingFrom(obs mysqlctl.Observation) string {
	r := obs.Replica
	if r == nil || r.IOThread == mysqlctl.ThreadStopped {
		return ""
	}
	return net.JoinHostPort(r.SourceHost, strconv.Itoa(r.SourcePort))
}

// peerConn returns a cached connection to a peer's mysqld.
func (a *Agent) peerConn(ctx context.Context, addr string) (Database, error) {
	a.peersMu.Lock()
	db, ok := a.peers[addr]
	a.peersMu.Unlock()
	if ok {
		return db, nil
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	db, err := a.dial(cctx, addr)
	if err != nil {
		a.log.Debug("peer mysqld not reachable", zap.String("addr", addr), zap.Error(err))
		return nil, err
	}
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	if prev, ok := a.peers[addr]; ok { // a concurrent dial won
		closeDB(db)
		return prev, nil
	}
	a.peers[addr] = db
	return db, nil
}

func (a *Agent) dropPeer(addr string) {
	a.peersMu.Lock()
	defer a.peersMu.Unlock()
	if db, ok := a.peers[addr]; ok {
		closeDB(db)
		delete(a.peers, addr)
	}
}

func closeDB(db Database) {
	if c, ok := db.(interface{ Close() error }); ok {
		c.Close()
	}
}

// onPeers runs f on each named probed peer in parallel under one
// retry_timeout bound and reports whether it succeeded on all of them.
func (a *Agent) onPeers(ctx context.Context, names []string, peers map[string]peerProbe, f func(context.Context, string, Database) error) bool {
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	errs := make([]error, len(names))
	done := make(chan struct{})
	for i, name := range names {
		go func() {
			defer func() { done <- struct{}{} }()
			p, ok := peers[name]
			if !ok || p.db == nil {
				errs[i] = fmt.Errorf("%s was not probed", name)
				return
			}
			errs[i] = f(cctx, name, p.db)
		}()
	}
	for range names {
		<-done
	}
	return errors.Join(errs...) == nil
}
