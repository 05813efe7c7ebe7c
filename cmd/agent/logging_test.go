package main

import (
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/mysqlha/mysqlha/testenv/syncbuf"
)

// TestKlogGoesThroughZap: client-go's klog lines come out as the agent's
// JSON records, at zap's levels, with verbose ones dropped at info.
func TestKlogGoesThroughZap(t *testing.T) {
	var out syncbuf.Buffer
	enc := zap.NewProductionEncoderConfig()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&out), zapcore.InfoLevel)).
		With(zap.String("member", "db1"))
	routeKlog(log)
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("watch of leases ended", "resource", "leases")
	klog.ErrorS(nil, "failed to list pods")
	klog.V(4).InfoS("a verbose line")
	klog.Flush()

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines, want 2 JSON records (verbose dropped):\n%s", len(lines), out.String())
	}
	want := []struct{ level, msg string }{{"info", "watch of leases ended"}, {"error", "failed to list pods"}}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i+1, err, line)
		}
		if rec["level"] != want[i].level || rec["msg"] != want[i].msg || rec["logger"] != "client-go" || rec["member"] != "db1" {
			t.Errorf("line %d = %s, want level %s, msg %q, logger client-go, member db1", i+1, line, want[i].level, want[i].msg)
		}
	}
	if !strings.Contains(lines[0], `"resource":"leases"`) {
		t.Errorf("klog's key/value pairs lost: %s", lines[0])
	}
}
