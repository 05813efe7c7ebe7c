package agent

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mysqlha/mysqlha/mysqlctl"
	"github.com/mysqlha/mysqlha/mysqlctl/gtid"
)

// fakeMySQL simulates the mysqld servers of a cluster, MariaDB-style: one
// GTID domain, replication applied instantly whenever a replica is observed
// while its receiver runs and its source is up.
type fakeMySQL struct {
	mu  sync.Mutex
	dbs map[string]*fakeDB // by addr
	// stream, when set, delivers each write at once to the replicas
	// streaming from the writer for which it returns true (a silent
	// agent's mysqld receives too); otherwise a replica receives only when
	// observed.
	stream func(replica string) bool
	// clock, when set, makes an armed dead-man event fire: the server
	// turns read-only at the time it was armed for.
	clock interface{ Now() time.Time }
	// confirmed are the writes whose client was told they committed: at
	// once without semi-sync, on the first acknowledgement with it.
	confirmed []txn
	// deadmenFired counts the dead-man events that fenced a server.
	deadmenFired int
}

// txn is one transaction's MariaDB GTID in domain 0.
type txn struct{ server, seq int }

func (x txn) String() string { return fmt.Sprintf("0-%d-%d", x.server, x.seq) }

type fakeDB struct {
	c        *fakeMySQL
	name     string
	addr     string
	serverID int
	up       bool
	readOnly bool
	// hist is the executed history, in order; relay is what the receiver
	// got beyond it, not applied yet.
	hist, relay []txn
	source      string // addr; "" when not a replica
	ioRunning   bool
	// ioErrno: the receiver stopped on an error (1236: the source's
	// binary log lacks our history, a fork).
	ioErrno     int
	behind      int64 // Seconds_Behind_Master reported while replicating
	semiSource  bool
	semiReplica bool

	// Faults a test injects: each makes the named call fail without effect,
	// as a call that timed out does. unreachable makes dials and
	// observations time out (a hung server or a cut link, not a refusal).
	fenceErr, stopIOErr, waitErr error
	unreachable                  bool
	// hung is a SIGSTOPped server: like unreachable, and it takes no writes
	// either until it resumes. cutFromPeers: only its own agent reaches it
	// (its replicas' streams are lost, peers' dials time out).
	hung, cutFromPeers bool
	// noSemiSyncReplica: replica-side semi-sync cannot be switched on (a
	// MySQL server without the plugin), so the member streams without
	// acknowledging.
	noSemiSyncReplica bool
	// noBinlog: started without log_bin, so it cannot serve as a source.
	noBinlog bool
	// deadmanErr makes arming the dead-man switch fail (no event
	// scheduler, say); deadmanArms counts the arms that succeeded, and
	// deadmanAfter is the last one's delay.
	deadmanErr   error
	deadmanArms  int
	deadmanAfter time.Duration
	// fenceCalls counts Fence calls, failed ones too; contacts counts the
	// dials by other members' agents and the observations by anyone.
	fenceCalls, contacts int
	// applyStopped: the replica applies nothing (a stopped SQL thread),
	// so it falls behind its source.
	applyStopped bool
	// sqlBroken: the SQL thread stopped on an error; the receiver goes on
	// filling the relay log, which is retrieved but never applied.
	sqlBroken bool
	// waiting are client writes on this server waiting for a semi-sync
	// acknowledgement; deadmanAt is when the armed dead-man event fires.
	waiting   []txn
	deadmanAt time.Time
}

// errTimedOut is what a call that ran into its deadline returns.
var errTimedOut = fmt.Errorf("%w: %w", mysqlctl.ErrTimeout, context.DeadlineExceeded)

func newFakeMySQL(names ...string) *fakeMySQL {
	c := &fakeMySQL{dbs: map[string]*fakeDB{}}
	for i, n := range names {
		addr := net.JoinHostPort("10.0.0."+strconv.Itoa(i+1), "3306")
		c.dbs[addr] = &fakeDB{c: c, name: n, addr: addr, serverID: i + 1, up: true}
	}
	return c
}

func (c *fakeMySQL) byName(name string) *fakeDB {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.dbs {
		if d.name == name {
			return d
		}
	}
	panic("no fake db " + name)
}

// dialFrom is the Dialer of the agent of server from.
func (c *fakeMySQL) dialFrom(from string) Dialer {
	return func(ctx context.Context, addr string) (Database, error) {
		c.mu.Lock()
		d, ok := c.dbs[addr]
		cut := ok && d.cutFromPeers && d.name != from
		if ok && d.name != from {
			d.contacts++
		}
		c.mu.Unlock()
		if cut {
			return nil, fmt.Errorf("dial %s: %w: %w", addr, mysqlctl.ErrUnreachable, context.DeadlineExceeded)
		}
		return c.dial(ctx, addr)
	}
}

func (c *fakeMySQL) dial(_ context.Context, addr string) (Database, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dbs[addr]
	if ok && (d.unreachable || d.hung) {
		return nil, fmt.Errorf("dial %s: %w: %w", addr, mysqlctl.ErrUnreachable, context.DeadlineExceeded)
	}
	if !ok || !d.up {
		return nil, fmt.Errorf("dial %s: %w: %w", addr, mysqlctl.ErrUnreachable, mysqlctl.ErrDown)
	}
	return d, nil
}

// writable lists the up servers an application could write to.
func (c *fakeMySQL) writable() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fireDeadmenLocked()
	var out []string
	for _, d := range c.dbs {
		if d.up && !d.readOnly && !d.hung {
			out = append(out, d.name)
		}
	}
	return out
}

// write commits one transaction on name; false if it is read-only or down.
// With semi-sync on, its client is told only once a replica acknowledges.
func (c *fakeMySQL) write(name string) bool {
	d := c.byName(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fireDeadmenLocked()
	if !d.up || d.readOnly || d.hung {
		return false
	}
	d.commitLocked(1)
	if d.semiSource {
		d.waiting = append(d.waiting, d.last())
	} else {
		c.confirmed = append(c.confirmed, d.last())
	}
	if c.stream != nil {
		for _, r := range c.dbs {
			if r.source == d.addr && c.stream(r.name) {
				r.syncLocked()
			}
		}
	}
	return true
}

// commit runs n transactions on d whatever its state (a user with the
// privilege to bypass read_only), without telling a client.
func (d *fakeDB) commit(n int) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	d.commitLocked(n)
}

func (d *fakeDB) commitLocked(n int) {
	for range n {
		d.hist = append(d.hist, txn{d.serverID, d.last().seq + 1})
	}
}

// crash stops d; its clients' waiting writes fail.
func (d *fakeDB) crash() {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	d.up, d.hung, d.waiting = false, false, nil
}

// has reports whether d executed x.
func (d *fakeDB) has(x txn) bool {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return slices.Contains(d.hist, x)
}

// seq is the seq_no of d's last executed transaction.
func (d *fakeDB) seq() int {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.last().seq
}

// fireDeadmenLocked runs the dead-man events that are due.
func (c *fakeMySQL) fireDeadmenLocked() {
	if c.clock == nil {
		return
	}
	now := c.clock.Now()
	for _, d := range c.dbs {
		if !d.deadmanAt.IsZero() && !now.Before(d.deadmanAt) && d.up && !d.hung {
			if !d.readOnly {
				c.deadmenFired++
			}
			d.readOnly, d.deadmanAt = true, time.Time{}
		}
	}
}

func (d *fakeDB) pidFile() string { return "/run/mysqld/" + d.name + ".pid" }

// kill is what killing the process behind pidFile does: the server is down
// (a hung one too). It fails like a process not in view when none matches.
func (c *fakeMySQL) kill(_ context.Context, pidFile string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.dbs {
		if d.up && d.pidFile() == pidFile {
			d.up, d.hung, d.waiting = false, false, nil
			return 1000 + d.serverID, nil
		}
	}
	return 0, fmt.Errorf("no mysqld process holds %s", pidFile)
}

func (d *fakeDB) last() txn {
	if len(d.hist) == 0 {
		return txn{}
	}
	return d.hist[len(d.hist)-1]
}

func (d *fakeDB) pos() string {
	if len(d.hist) == 0 {
		return ""
	}
	return d.last().String()
}

// binlogState is @@gtid_binlog_state: the last transaction each server
// wrote in the history (domain 0), ordered by server id.
func (d *fakeDB) binlogState() string {
	last := map[int]int{}
	for _, x := range d.hist {
		last[x.server] = max(last[x.server], x.seq)
	}
	var out []string
	for id := range 1000 {
		if seq, ok := last[id]; ok {
			out = append(out, txn{server: id, seq: seq}.String())
		}
	}
	return strings.Join(out, ",")
}

// retrievedPos is the last transaction received, applied or not.
func (d *fakeDB) retrievedPos() string {
	if len(d.relay) > 0 {
		return d.relay[len(d.relay)-1].String()
	}
	return d.pos()
}

// syncLocked receives the source's history if the replica can reach it,
// acknowledging it when semi-sync is on at both ends, and applies the
// relay log unless the SQL thread is stopped. A source whose history
// does not contain ours fails the receiver with 1236, as MariaDB does.
func (d *fakeDB) syncLocked() {
	if d.applyStopped {
		return
	}
	defer func() {
		if !d.sqlBroken {
			d.hist, d.relay = append(d.hist, d.relay...), nil
		}
	}()
	if d.source == "" || !d.ioRunning || !d.up || d.hung {
		return
	}
	src, ok := d.c.dbs[d.source]
	if !ok || !src.up || src.hung || src.cutFromPeers {
		return
	}
	got := append(slices.Clone(d.hist), d.relay...)
	switch {
	case isPrefix(got, src.hist):
		d.relay = append(d.relay, src.hist[len(got):]...)
		if d.semiReplica && src.semiSource {
			// The acknowledgement: the waiting clients of what we now hold
			// are told their writes committed.
			src.waiting = slices.DeleteFunc(src.waiting, func(x txn) bool {
				if slices.Contains(d.relay, x) || slices.Contains(d.hist, x) {
					d.c.confirmed = append(d.c.confirmed, x)
					return true
				}
				return false
			})
		}
	case !isPrefix(src.hist, got):
		d.ioRunning, d.ioErrno = false, 1236
	}
}

func isPrefix(p, of []txn) bool { return len(p) <= len(of) && slices.Equal(p, of[:len(p)]) }

func (d *fakeDB) check() error {
	if d.unreachable || d.hung {
		return fmt.Errorf("%s: %w: %w", d.addr, mysqlctl.ErrUnreachable, context.DeadlineExceeded)
	}
	if !d.up {
		return fmt.Errorf("%s: %w: %w", d.addr, mysqlctl.ErrUnreachable, mysqlctl.ErrDown)
	}
	return nil
}

func (d *fakeDB) Server() mysqlctl.ServerInfo {
	return mysqlctl.ServerInfo{Flavor: gtid.MariaDB, Version: mysqlctl.Version{Major: 10, Minor: 11}}
}

func (d *fakeDB) Observe(context.Context) (mysqlctl.Observation, error) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	d.contacts++
	if err := d.check(); err != nil {
		return mysqlctl.Observation{}, err
	}
	d.syncLocked()
	d.c.fireDeadmenLocked()
	o := mysqlctl.Observation{Status: mysqlctl.Status{
		ServerID: uint32(d.serverID), ReadOnly: d.readOnly, GTIDExecuted: d.pos(), GTIDSlavePos: d.pos(), GTIDBinlogState: d.binlogState(), PIDFile: d.pidFile(),
		LogBin: !d.noBinlog, LogReplicaUpdates: true,
		SemiSync: d.semiSyncLocked(),
	}}
	if d.source != "" {
		host, port, _ := net.SplitHostPort(d.source)
		p, _ := strconv.Atoi(port)
		io := mysqlctl.ThreadStopped
		if d.ioRunning {
			io = mysqlctl.ThreadRunning
			if src, ok := d.c.dbs[d.source]; !ok || !src.up || src.hung || src.unreachable || src.cutFromPeers {
				io = mysqlctl.ThreadConnecting // retrying a lost source
			}
		}
		behind := d.behind
		o.Replica = &mysqlctl.ReplicaStatus{SourceHost: host, SourcePort: p, IOThread: io, SQLThread: mysqlctl.ThreadRunning,
			RetrievedGTID: d.retrievedPos(), ExecutedGTID: d.pos(), AutoPosition: true, SecondsBehind: &behind}
		if d.ioErrno != 0 {
			o.Replica.IOThread, o.Replica.LastIOErrno = mysqlctl.ThreadStopped, d.ioErrno
			o.Replica.LastIOError = "could not find GTID state requested by slave in any binlog files"
		}
		if d.sqlBroken {
			o.Replica.SQLThread, o.Replica.LastSQLErrno, o.Replica.LastSQLError = mysqlctl.ThreadStopped, 1062, "Duplicate entry"
		}
	}
	return o, nil
}

// semiSyncLocked is what the server reports of semi-sync: a replica
// acknowledges while its receiver runs with semi-sync on; a source counts
// those pulling from it.
func (d *fakeDB) semiSyncLocked() mysqlctl.SemiSyncStatus {
	ss := mysqlctl.SemiSyncStatus{SourceEnabled: d.semiSource, ReplicaEnabled: d.semiReplica,
		ReplicaActive: d.semiReplica && d.source != "" && d.ioRunning}
	if d.semiSource {
		ss.SourceActive, ss.WaitPoint = true, mysqlctl.WaitPointAfterSync
		for _, r := range d.c.dbs {
			if r.up && r.source == d.addr && r.ioRunning && r.semiReplica {
				ss.SourceClients++
			}
		}
	}
	return ss
}

func (d *fakeDB) locked(f func()) error {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if err := d.check(); err != nil {
		return err
	}
	f()
	return nil
}

// fail runs f unless err is set, which it returns instead.
func (d *fakeDB) fail(err *error, f func()) error {
	return d.locked(func() {
		if *err == nil {
			f()
		}
	})
}

// isReadOnly reads readOnly under the lock, for tests that run the
// watchdog goroutine.
func (d *fakeDB) isReadOnly() bool {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.readOnly
}

// setFault sets a fault under the lock, for tests that run the watchdog
// goroutine.
func (d *fakeDB) setFault(fault *error, err error) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	*fault = err
}

func (d *fakeDB) fences() int {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.fenceCalls
}

func (d *fakeDB) faultOf(err *error) error {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return *err
}

func (d *fakeDB) Fence(context.Context) error {
	d.c.mu.Lock()
	d.fenceCalls++
	d.c.mu.Unlock()
	if err := d.fail(&d.fenceErr, func() { d.readOnly = true }); err != nil {
		return err
	}
	return d.faultOf(&d.fenceErr)
}
func (d *fakeDB) Unfence(context.Context) error { return d.locked(func() { d.readOnly = false }) }
func (d *fakeDB) ArmDeadman(_ context.Context, after time.Duration) error {
	if err := d.fail(&d.deadmanErr, func() {
		d.deadmanArms++
		d.deadmanAfter = after
		if d.c.clock != nil {
			d.deadmanAt = d.c.clock.Now().Add(after)
		}
	}); err != nil {
		return err
	}
	return d.faultOf(&d.deadmanErr)
}
func (d *fakeDB) KillClients(context.Context) (int, error) {
	return 0, d.locked(func() {})
}
func (d *fakeDB) StopReplicationIO(context.Context) error {
	if err := d.fail(&d.stopIOErr, func() { d.syncLocked(); d.ioRunning = false }); err != nil {
		return err
	}
	return d.faultOf(&d.stopIOErr)
}
func (d *fakeDB) StartReplication(context.Context) error {
	return d.locked(func() { d.ioRunning, d.ioErrno = d.source != "", 0 })
}

// ResetReplication and ReplicateFrom drop the relay log, as RESET SLAVE
// and CHANGE MASTER do: what was received and not applied is gone.
func (d *fakeDB) ResetReplication(context.Context) error {
	return d.locked(func() { d.source, d.ioRunning, d.ioErrno, d.relay = "", false, 0, nil })
}
func (d *fakeDB) ReplicateFrom(_ context.Context, src mysqlctl.Source) error {
	return d.locked(func() {
		d.source, d.ioRunning, d.ioErrno, d.relay = net.JoinHostPort(src.Host, strconv.Itoa(src.Port)), true, 0, nil
		d.syncLocked()
	})
}
func (d *fakeDB) WaitForGTID(_ context.Context, set string, _ time.Duration) error {
	var err error
	lerr := d.locked(func() {
		d.syncLocked()
		if set != "" && set != d.pos() {
			var server, seq int
			fmt.Sscanf(set, "0-%d-%d", &server, &seq)
			if d.last().seq < seq {
				err = mysqlctl.ErrTimeout
			}
		}
	})
	if lerr != nil {
		return lerr
	}
	if ferr := d.faultOf(&d.waitErr); ferr != nil {
		return ferr
	}
	return err
}
func (d *fakeDB) SetSemiSyncSource(_ context.Context, on bool, _ time.Duration, _ int) error {
	return d.locked(func() { d.semiSource = on })
}
func (d *fakeDB) SetSemiSyncReplica(_ context.Context, on bool) error {
	var err error
	lerr := d.locked(func() {
		if on && d.noSemiSyncReplica {
			err = fmt.Errorf("%s: semi-sync replica plugin not loaded", d.addr)
			return
		}
		d.semiReplica = on
	})
	return cmp.Or(lerr, err)
}
