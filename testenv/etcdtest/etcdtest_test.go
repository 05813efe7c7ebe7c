package etcdtest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mysqlha/mysqlha/testenv/etcdtest"
)

func TestPutGetStop(t *testing.T) {
	begin := time.Now()
	srv := etcdtest.Start(t)
	t.Logf("etcd ready in %v at %v", time.Since(begin), srv.Endpoints())
	cli := srv.Client(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/mysqlha/test/key", "value"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := cli.Get(ctx, "/mysqlha/test/key")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "value" {
		t.Fatalf("get returned %v, want one kv with value %q", resp.Kvs, "value")
	}

	// An open watch must not make Stop slow (dead-DCS tests watch keys).
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wch := cli.Watch(wctx, "/mysqlha/test/", clientv3.WithPrefix())
	if _, err := cli.Put(ctx, "/mysqlha/test/other", "x"); err != nil {
		t.Fatalf("put: %v", err)
	}
	<-wch

	begin = time.Now()
	srv.Stop()
	t.Logf("etcd stopped in %v", time.Since(begin))
	srv.Stop() // idempotent

	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := cli.Get(ctx2, "/mysqlha/test/key"); err == nil {
		t.Fatal("get succeeded after Stop")
	}
}

// TestMinimalLeaseTTL pins the documented MinLeaseTTL: a lease of that many
// seconds is granted as requested and expires about that late.
func TestMinimalLeaseTTL(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	lease, err := cli.Grant(ctx, etcdtest.MinLeaseTTL)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if lease.TTL != etcdtest.MinLeaseTTL {
		t.Fatalf("granted TTL %d s for a %d s request", lease.TTL, etcdtest.MinLeaseTTL)
	}
	if _, err := cli.Put(ctx, "leader", "me", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("put: %v", err)
	}
	begin := time.Now()
	for {
		resp, err := cli.Get(ctx, "leader")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if resp.Count == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("key with a %d s lease expired %v after put", lease.TTL, time.Since(begin))
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("key outlived its %d s lease by far: %v", lease.TTL, d)
	}
}

func TestWithClientHost(t *testing.T) {
	// 127.0.0.2 is loopback (127/8) on Linux without any set-up, so it stands
	// in for a bridge address here.
	srv := etcdtest.Start(t, etcdtest.WithClientHost("127.0.0.2"))
	eps := srv.Endpoints()
	if len(eps) != 2 {
		t.Fatalf("endpoints %v, want 2", eps)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps[1:], DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put via %s: %v", eps[1], err)
	}
}

// TestLaunchFixedClientPort runs the TB-free entry point as the demo does: a
// fixed client port, state in a given directory, stopped by the caller. A
// second member on the same port must fail rather than pick another port.
func TestLaunchFixedClientPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	dir := t.TempDir()
	srv, err := etcdtest.Launch(dir, etcdtest.WithClientPort(port))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer srv.Stop()
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); srv.Endpoints()[0] != want {
		t.Fatalf("endpoints %v, want %s first", srv.Endpoints(), want)
	}
	if srv.LogFile() != filepath.Join(dir, "etcd.log") {
		t.Errorf("LogFile() = %s, want it in %s", srv.LogFile(), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "member")); err != nil {
		t.Errorf("no member data in %s: %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := srv.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}

	if other, err := etcdtest.Launch(t.TempDir(), etcdtest.WithClientPort(port)); err == nil {
		other.Stop()
		t.Fatalf("a second member started on the taken port %d", port)
	} else if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("second member on a taken port failed with %v, want address already in use", err)
	}
}
