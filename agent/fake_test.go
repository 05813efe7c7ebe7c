package agent

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strconv"
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
}

type fakeDB struct {
	c        *fakeMySQL
	name     string
	addr     string
	serverID int
	up       bool
	readOnly bool
	// Executed history: last (server, seq) in domain 0.
	lastServer, seq int
	source          string // addr; "" when not a replica
	ioRunning       bool
	behind          int64 // Seconds_Behind_Master reported while replicating
	semiSource      bool
	semiReplica     bool

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
	// fenceCalls counts Fence calls, failed ones too.
	fenceCalls int
	// applyStopped: the replica applies nothing (a stopped SQL thread),
	// so it falls behind its source.
	applyStopped bool
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
	var out []string
	for _, d := range c.dbs {
		if d.up && !d.readOnly && !d.hung {
			out = append(out, d.name)
		}
	}
	return out
}

// write commits one transaction on name; false if it is read-only or down.
func (c *fakeMySQL) write(name string) bool {
	d := c.byName(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !d.up || d.readOnly || d.hung {
		return false
	}
	d.seq++
	d.lastServer = d.serverID
	return true
}

func (d *fakeDB) pidFile() string { return "/run/mysqld/" + d.name + ".pid" }

// kill is what killing the process behind pidFile does: the server is down
// (a hung one too). It fails like a process not in view when none matches.
func (c *fakeMySQL) kill(_ context.Context, pidFile string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.dbs {
		if d.up && d.pidFile() == pidFile {
			d.up, d.hung = false, false
			return 1000 + d.serverID, nil
		}
	}
	return 0, fmt.Errorf("no mysqld process holds %s", pidFile)
}

func (d *fakeDB) pos() string {
	if d.seq == 0 {
		return ""
	}
	return fmt.Sprintf("0-%d-%d", d.lastServer, d.seq)
}

// syncLocked applies the source's history if the replica can reach it.
func (d *fakeDB) syncLocked() {
	if d.source == "" || !d.ioRunning || d.applyStopped {
		return
	}
	src, ok := d.c.dbs[d.source]
	if ok && src.up && !src.cutFromPeers && src.seq >= d.seq {
		d.seq, d.lastServer = src.seq, src.lastServer
	}
}

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
	if err := d.check(); err != nil {
		return mysqlctl.Observation{}, err
	}
	d.syncLocked()
	o := mysqlctl.Observation{Status: mysqlctl.Status{
		ServerID: uint32(d.serverID), ReadOnly: d.readOnly, GTIDExecuted: d.pos(), GTIDSlavePos: d.pos(), PIDFile: d.pidFile(),
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
			RetrievedGTID: d.pos(), ExecutedGTID: d.pos(), AutoPosition: true, SecondsBehind: &behind}
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
	if err := d.fail(&d.deadmanErr, func() { d.deadmanArms++; d.deadmanAfter = after }); err != nil {
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
	return d.locked(func() { d.ioRunning = d.source != "" })
}
func (d *fakeDB) ResetReplication(context.Context) error {
	return d.locked(func() { d.source, d.ioRunning = "", false })
}
func (d *fakeDB) ReplicateFrom(_ context.Context, src mysqlctl.Source) error {
	return d.locked(func() {
		d.source, d.ioRunning = net.JoinHostPort(src.Host, strconv.Itoa(src.Port)), true
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
			if d.seq < seq {
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
