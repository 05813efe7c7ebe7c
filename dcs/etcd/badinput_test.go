package etcd_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mysqlha/mysqlha/dcs"
	"github.com/mysqlha/mysqlha/dcs/etcd"
	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func waitCluster(t *testing.T, s dcs.Store, what string, cond func(*dcs.Cluster) bool) *dcs.Cluster {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := s.Cluster(ctx5(t))
		if err == nil && cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s (err %v, cluster %+v)", what, err, c)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasProblem(c *dcs.Cluster, substr string) bool {
	for _, p := range c.Problems {
		if errors.Is(p, dcs.ErrCorrupt) && strings.Contains(p.Error(), substr) {
			return true
		}
	}
	return false
}

func put(t *testing.T, cli *clientv3.Client, key, value string, opts ...clientv3.OpOption) {
	t.Helper()
	if _, err := cli.Put(ctx5(t), key, value, opts...); err != nil {
		t.Fatal(err)
	}
}

// testGarbageLeader: a leader key that cannot be read is held by
// dcs.UnknownHolder, never by this member; bound to a lease it is held until
// that lease expires, unbound it is replaced after it stays unchanged for
// the config's (or its declared) ttl on this member's clock.
func testGarbageLeader(t *testing.T, cli *clientv3.Client) {
	for _, tc := range []struct {
		name, value string
		leased      bool
		want        string // in the corruption error; "" = readable
		holdFor     time.Duration
	}{
		{"leased garbage", "\x00\xffnot json", true, "leader record is not valid JSON", 0},
		{"leased impossible ttl naming me", `{"holder":"m0","ttl_seconds":-5,"acquired_at":"2025-01-01T00:00:00Z"}`, true, "impossible ttl_seconds -5", 0},
		{"leased absurd ttl naming me", `{"holder":"m0","ttl_seconds":99999999999,"acquired_at":"2025-01-01T00:00:00Z"}`, true, "impossible ttl_seconds 99999999999", 0},
		{"unleased garbage", "{", false, "leader record is not valid JSON", dcs.DefaultTTL},
		{"unleased missing fields", `{"holder":"m0"}`, false, "acquired_at is missing", dcs.DefaultTTL},
		{"unleased valid record naming me", `{"holder":"m0","ttl_seconds":9,"acquired_at":"2025-01-01T00:00:00Z"}`, false, "", 9 * time.Second},
		// An older agent named m0 holds it: another agent, not this store.
		{"leased record naming me without an instance", `{"holder":"m0","ttl_seconds":9,"acquired_at":"2025-01-01T00:00:00Z"}`, true, "", 0},
		{"leased record naming me with another instance", `{"holder":"m0","instance":"0123456789abcdef","ttl_seconds":9,"acquired_at":"2025-01-01T00:00:00Z"}`, true, "", 0},
		{"leased record naming me with a malformed instance", `{"holder":"m0","instance":"Not/An-Id","ttl_seconds":9,"acquired_at":"2025-01-01T00:00:00Z"}`, true, `agent instance id "Not/An-Id"`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := newCluster()
			clk := fakeClock()
			a := newStore(t, cli, cluster, "m0", clk)
			key := etcd.DefaultPrefix + "/" + cluster + "/leader"
			var lease clientv3.LeaseID
			if tc.leased {
				g, err := cli.Grant(ctx5(t), 30)
				if err != nil {
					t.Fatal(err)
				}
				lease = g.ID
				put(t, cli, key, tc.value, clientv3.WithLease(lease))
			} else {
				put(t, cli, key, tc.value)
			}
			c := waitCluster(t, a, "the lock record is seen", func(c *dcs.Cluster) bool { return c.Leader != nil })
			l := c.Leader
			if tc.want != "" {
				if l.Holder != dcs.UnknownHolder || !errors.Is(l.Err, dcs.ErrCorrupt) || !strings.Contains(l.Err.Error(), key) || !strings.Contains(l.Err.Error(), tc.want) {
					t.Fatalf("corrupt lock read as %+v, want held by %s with an error naming %s and %q", l, dcs.UnknownHolder, key, tc.want)
				}
				if !hasProblem(c, tc.want) {
					t.Fatalf("Problems do not report it: %v", c.Problems)
				}
			}
			if l.Expired {
				t.Fatalf("lock reads expired at once: %+v", l)
			}
			if l.Instance == a.Instance() {
				t.Fatalf("lock reads as held by this store's instance: %+v", l)
			}
			// Never held by me, whatever the record says.
			if err := a.RenewLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrNotLeader) {
				t.Fatalf("renew: %v, want ErrNotLeader", err)
			}
			if err := a.ReleaseLeader(ctx5(t)); !errors.Is(err, dcs.ErrNotLeader) {
				t.Fatalf("release: %v, want ErrNotLeader", err)
			}
			if tc.leased {
				clk.Step(time.Hour) // the observer's clock is irrelevant here
				if err := a.AcquireLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrHeld) || !strings.Contains(err.Error(), "etcd lease") {
					t.Fatalf("acquire over a leased record: %v, want ErrHeld until the lease expires", err)
				}
				if _, err := cli.Revoke(ctx5(t), lease); err != nil {
					t.Fatal(err)
				}
				waitCluster(t, a, "the record vanished with its lease", func(c *dcs.Cluster) bool { return c.Leader == nil })
			} else {
				clk.Step(tc.holdFor - time.Millisecond)
				if err := a.AcquireLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrHeld) || !strings.Contains(err.Error(), "no lease") {
					t.Fatalf("acquire before ttl: %v, want ErrHeld", err)
				}
				clk.Step(time.Millisecond)
			}
			if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
				t.Fatalf("acquire once the record may be replaced: %v", err)
			}
			if err := a.RenewLeader(ctx5(t), ttl); err != nil {
				t.Fatalf("renew after taking over: %v", err)
			}
			c = waitCluster(t, a, "m0 holds", func(c *dcs.Cluster) bool { return c.Leader != nil && c.Leader.Holder == "m0" && c.Leader.Err == nil })
			if len(c.Problems) != 0 {
				t.Fatalf("problems after takeover: %v", c.Problems)
			}
		})
	}
}

func testGarbageRecords(t *testing.T, cli *clientv3.Client) {
	cluster := newCluster()
	a := newStore(t, cli, cluster, "m0", fakeClock())
	p := etcd.DefaultPrefix + "/" + cluster + "/"
	put(t, cli, p+"members/m1", `{"name":"m1","role":`)
	put(t, cli, p+"members/m2", `{"name":"m7","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z"}`)
	put(t, cli, p+"members/m3", `{"name":"m3","role":"replica","replication":"running","updated_at":"2025-01-01T00:00:00Z","api_url":"ftp://x","mysql_addr":"nohost"}`)
	put(t, cli, p+"config", `{"ttl":"banana"}`)
	put(t, cli, p+"switchover", `{"from":"m0","to":"m0","requested_at":"2025-01-01T00:00:00Z"}`)
	put(t, cli, p+"restart", `{"member":"DB 1","requested_at":"2025-01-01T00:00:00Z"}`)
	put(t, cli, p+"initialized", "\xff")
	put(t, cli, p+"history", `{"not":"a list"}`)
	c := waitCluster(t, a, "all garbage seen", func(c *dcs.Cluster) bool { return len(c.Problems) == 8 })
	for _, want := range []string{
		p + "members/m1: member record is not valid JSON",
		p + `restart: invalid restart request: dcs: invalid argument: restart member name "DB 1"`,
		`record names member "m7", want "m2"`,
		`api url "ftp://x" must be http(s)://host[:port]`,
		p + `config: invalid config: ttl: time: invalid duration "banana"`,
		`switchover from and to are both "m0"`,
		p + "initialized: initialized record is not valid JSON",
		p + "history: history is not a valid JSON list",
	} {
		if !hasProblem(c, want) {
			t.Errorf("no problem reported containing %q; problems: %v", want, c.Problems)
		}
	}
	if len(c.Members) != 0 || c.Config != dcs.DefaultConfig() || c.History != nil {
		t.Fatalf("garbage leaked into the snapshot: %+v", c)
	}
	if !errors.Is(c.ConfigErr, dcs.ErrCorrupt) {
		t.Fatalf("ConfigErr %v, want the unreadable config flagged (a reader must not act on the defaults)", c.ConfigErr)
	}
	if c.Switchover == nil || c.Switchover.Err == nil || c.Initialized == nil || c.Initialized.Err == nil {
		t.Fatalf("unreadable switchover/initialized must be present with Err: %+v %+v", c.Switchover, c.Initialized)
	}
	if c.Restart == nil || !errors.Is(c.Restart.Err, dcs.ErrCorrupt) || c.RestartPending("DB 1") {
		t.Fatalf("an unreadable restart request must be present with Err, and name no member: %+v", c.Restart)
	}
	if err := a.ClearRestart(ctx5(t), c.Restart.Version); err != nil {
		t.Fatalf("clearing a corrupt restart request: %v", err)
	}
	if err := a.SetConfig(ctx5(t), dcs.DefaultConfig(), c.ConfigVersion); err != nil {
		t.Fatalf("overwriting a corrupt config: %v", err)
	}
	if err := a.ClearSwitchover(ctx5(t), c.Switchover.Version); err != nil {
		t.Fatalf("clearing a corrupt switchover: %v", err)
	}
	if err := a.SetInitialized(ctx5(t), dcs.Initialized{ClusterID: "x"}); !errors.Is(err, dcs.ErrExists) {
		t.Fatalf("an unreadable initialized record must still count as initialized: %v", err)
	}
	if err := a.AppendHistory(ctx5(t), dcs.HistoryEntry{Kind: dcs.HistoryFailover, To: "m0", At: time.Now()}); err != nil {
		t.Fatalf("appending to a corrupt history: %v", err)
	}
	waitCluster(t, a, "repaired", func(c *dcs.Cluster) bool {
		return len(c.Problems) == 4 && len(c.History) == 1 && c.Switchover == nil && c.Restart == nil
	})
}

// delayProxy forwards loopback TCP to target, delaying every chunk from the
// server while slow is set: an etcd that answers slower than retry_timeout.
type delayProxy struct {
	l     net.Listener
	slow  atomic.Bool
	delay time.Duration
	wg    sync.WaitGroup
}

func startDelayProxy(t *testing.T, target string, delay time.Duration) *delayProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{l: l, delay: delay}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
			go func() { defer p.wg.Done(); p.copySlow(c, s); c.Close() }()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return p
}

func (p *delayProxy) copySlow(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.slow.Load() {
				time.Sleep(p.delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *delayProxy) endpoint() string { return "http://" + p.l.Addr().String() }

// testSlowEtcd: an etcd slower than retry_timeout yields ErrUnreachable
// within the caller's deadline, and never false leadership.
func testSlowEtcd(t *testing.T, srv *etcdtest.Server, cli *clientv3.Client) {
	const retryTimeout = 300 * time.Millisecond
	target := strings.TrimPrefix(srv.Endpoints()[0], "http://")
	proxy := startDelayProxy(t, target, 2*retryTimeout)
	slowCli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slowCli.Close() })
	cluster := newCluster()
	a := newStore(t, slowCli, cluster, "m0", fakeClock())
	b := newStore(t, cli, cluster, "m1", fakeClock())
	if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	call := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), retryTimeout)
		t.Cleanup(cancel)
		return ctx
	}
	proxy.slow.Store(true)
	start := time.Now()
	err = a.RenewLeader(call(), ttl)
	if !errors.Is(err, dcs.ErrUnreachable) {
		t.Fatalf("renew against a slow etcd: %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 2*retryTimeout {
		t.Fatalf("renew took %v, beyond its %v deadline", d, retryTimeout)
	}
	// a cannot renew: its lease expires on the server and b takes over.
	waitCluster(t, b, "the lock expired", func(c *dcs.Cluster) bool { return c.Leader == nil })
	if err := b.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatalf("b takes over: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := a.RenewLeader(call(), ttl); err == nil {
			t.Fatal("a slow stale holder renewed")
		}
		if err := a.AcquireLeader(call(), ttl); err == nil {
			t.Fatal("a slow store claimed the lock held by b")
		}
	}
	proxy.slow.Store(false)
	if err := a.RenewLeader(ctx5(t), ttl); !errors.Is(err, dcs.ErrNotLeader) {
		t.Fatalf("stale holder renews once etcd is fast again: %v, want ErrNotLeader", err)
	}
}

// testForbidden: etcd with authentication enabled, as a user without any
// role: reads and writes fail with ErrForbidden.
func testForbidden(t *testing.T) {
	srv := etcdtest.Start(t)
	root := srv.Client(t)
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx5(t), "root", "rootpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx5(t), "root", "root"); return err },
		func() error { _, err := root.UserAdd(ctx5(t), "agent", "agentpw"); return err },
		func() error { _, err := root.AuthEnable(ctx5(t)); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Username: "agent", Password: "agentpw", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s := newStore(t, cli, newCluster(), "m0", fakeClock())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.Cluster(ctx); !errors.Is(err, dcs.ErrForbidden) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Cluster without permissions: %v, want ErrForbidden", err)
	}
	if err := s.SetConfig(ctx5(t), dcs.DefaultConfig(), ""); !errors.Is(err, dcs.ErrForbidden) || !strings.Contains(err.Error(), "grant the agent's etcd user") {
		t.Fatalf("SetConfig without permissions: %v, want ErrForbidden with the fix", err)
	}
}

// testServerDies: with etcd gone, the holder's renew fails with
// ErrUnreachable within its deadline; the snapshot stays served.
func testServerDies(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	a := newStore(t, cli, newCluster(), "m0", fakeClock())
	if err := a.AcquireLeader(ctx5(t), ttl); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := a.RenewLeader(ctx, ttl); !errors.Is(err, dcs.ErrUnreachable) {
		t.Fatalf("renew with etcd stopped: %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("renew took %v with a 500ms deadline", d)
	}
	if c, err := a.Cluster(ctx5(t)); err != nil || c.Leader == nil || c.Leader.Holder != "m0" {
		t.Fatalf("snapshot after etcd stopped: %+v, %v", c, err)
	}
}

// TestNewRejectsBadInstance: Options.Instance is checked before anything
// else happens; an empty one is drawn at random.
func TestNewRejectsBadInstance(t *testing.T) {
	cli := unreachableClient(t)
	for _, inst := range []string{"UPPER", "a/b", "a b", "a_b", strings.Repeat("a", dcs.MaxInstanceLen+1)} {
		_, err := etcd.New(etcd.Options{Client: cli, Cluster: "c", Member: "m0", Instance: inst})
		if !errors.Is(err, dcs.ErrInvalid) || !strings.Contains(err.Error(), "leave Instance empty") {
			t.Errorf("New with instance %q: %v, want ErrInvalid naming the fix", inst, err)
		}
	}
	s, err := etcd.New(etcd.Options{Client: cli, Cluster: "c", Member: "m0", Instance: "given-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Instance() != "given-1" {
		t.Fatalf("Instance() = %q, want the given one", s.Instance())
	}
	r, err := etcd.New(etcd.Options{Client: cli, Cluster: "c", Member: "m0"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Instance()) != 16 || dcs.ValidateInstance(r.Instance()) != nil {
		t.Fatalf("drawn Instance() = %q, want 16 hex characters", r.Instance())
	}
}

func TestBadInput(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	t.Run("GarbageLeaderKey", func(t *testing.T) { testGarbageLeader(t, cli) })
	t.Run("GarbageRecords", func(t *testing.T) { testGarbageRecords(t, cli) })
	t.Run("SlowEtcd", func(t *testing.T) { testSlowEtcd(t, srv, cli) })
	t.Run("Forbidden", testForbidden)
	t.Run("ServerDies", testServerDies)
}
