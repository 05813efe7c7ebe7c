package mysqlctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// A broken connection is down only when nothing listens any more; a
// timeout is never down, whatever listens (a hung server may resume).
func TestClassifyAtProbesABrokenConnection(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	broken := fmt.Errorf("reading variables: %w", mysql.ErrInvalidConn)
	// Through an Instance's error wrapping, as every operation reports.
	if err := (&Instance{cfg: Config{Addr: goneAddr}}).wrap("reading variables", broken); !errors.Is(err, ErrDown) {
		t.Errorf("a connection broken by a server that is gone since: %v; want ErrDown", err)
	}
	for _, tc := range []struct {
		name string
		addr string
		err  error
		down bool
	}{
		{"broken, nothing listens", goneAddr, broken, true},
		{"broken, a server listens", live.Addr().String(), broken, false},
		{"timed out, nothing listens", goneAddr, context.DeadlineExceeded, false},
		{"socket file gone", "/nonexistent/mysqld.sock", broken, true},
	} {
		got := classifyAt(tc.addr, tc.err)
		if errors.Is(got, ErrDown) != tc.down || !errors.Is(got, ErrUnreachable) || !errors.Is(got, tc.err) {
			t.Errorf("%s: %v; want down=%v, unreachable, wrapping the cause", tc.name, got, tc.down)
		}
	}
}
