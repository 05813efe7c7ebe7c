package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mysqlha/mysqlha/ctl"
)

// An API server that is down (nothing listens) or hung (it accepts and
// never answers): agentctl status --timeout=1s gives up within about its
// timeout, exit 8, naming the address, the namespace and the cause.
func TestDeadAPIServerHonoursTimeout(t *testing.T) {
	isolateKube(t)
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := closed.Addr().String()
	closed.Close()
	for name, addr := range map[string]string{"down": down, "hung": hung.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			kc := filepath.Join(t.TempDir(), "config")
			cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"http://%s\"}\n"+
				"contexts:\n- name: c\n  context: {cluster: c, namespace: dbns}\ncurrent-context: c\n", addr)
			if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			began := time.Now()
			err := Run(context.Background(), Agentctl, []string{"status", "demo", "--kubeconfig=" + kc, "--timeout=1s"},
				Deps{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
			took := time.Since(began)
			if code := ctl.ExitCode(err); code != ctl.ExitUnreachable {
				t.Fatalf("exit %d (%v), want %d", code, err, ctl.ExitUnreachable)
			}
			for _, want := range []string{"http://" + addr, "namespace dbns"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not name %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "<nil>") {
				t.Errorf("%q names no cause", err)
			}
			if took > 2*time.Second {
				t.Errorf("took %v with --timeout=1s", took.Round(time.Millisecond))
			}
			t.Logf("%s: %v in %v", name, err, took.Round(time.Millisecond))
		})
	}
}
