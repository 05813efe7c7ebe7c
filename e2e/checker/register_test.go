package checker

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestCheckRegister(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	w := func(client int, key, v int64, call, ret int) RegisterOp {
		return RegisterOp{Client: client, Key: key, Write: true, Value: v, Call: at(call), Return: at(ret)}
	}
	r := func(client int, key, v int64, call, ret int) RegisterOp {
		return RegisterOp{Client: client, Key: key, Value: v, Call: at(call), Return: at(ret)}
	}
	failed := func(op RegisterOp) RegisterOp { op.Failed = true; return op }
	for _, c := range []struct {
		name string
		ops  []RegisterOp
		want porcupine.CheckResult
	}{
		{"reads follow writes", []RegisterOp{w(0, 1, 5, 0, 10), r(1, 1, 5, 20, 30), w(0, 1, 6, 40, 50), r(1, 1, 6, 60, 70)}, porcupine.Ok},
		{"a never-written key reads 0", []RegisterOp{r(0, 7, 0, 0, 10)}, porcupine.Ok},
		{"a read concurrent with a write sees either", []RegisterOp{w(0, 1, 5, 0, 10), w(0, 1, 6, 20, 40), r(1, 1, 5, 25, 30)}, porcupine.Ok},
		{"a stale read after an acknowledged write", []RegisterOp{w(0, 1, 5, 0, 10), w(0, 1, 6, 20, 30), r(1, 1, 5, 40, 50)}, porcupine.Illegal},
		{"a read of a value never written", []RegisterOp{w(0, 1, 5, 0, 10), r(1, 1, 9, 20, 30)}, porcupine.Illegal},
		{"a value that comes back after a newer one was read", []RegisterOp{w(0, 1, 5, 0, 10), w(0, 1, 6, 20, 30), r(1, 1, 6, 40, 50), r(1, 1, 5, 60, 70)}, porcupine.Illegal},
		{"a failed write may have happened, later", []RegisterOp{failed(w(0, 1, 5, 0, 10)), r(1, 1, 0, 20, 30), r(1, 1, 5, 40, 50)}, porcupine.Ok},
		{"a failed read says nothing", []RegisterOp{w(0, 1, 5, 0, 10), failed(r(1, 1, 9, 20, 30))}, porcupine.Ok},
		{"keys are independent", []RegisterOp{w(0, 1, 5, 0, 10), w(0, 2, 8, 0, 10), r(1, 2, 8, 20, 30), r(1, 1, 5, 20, 30)}, porcupine.Ok},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := CheckRegister(c.ops, 10*time.Second)
			if rep.Verdict != c.want {
				t.Fatalf("verdict %s, want %s", rep.Verdict, c.want)
			}
			if (len(rep.Violations()) > 0) != (c.want == porcupine.Illegal) {
				t.Errorf("violations %q with verdict %s", rep.Violations(), rep.Verdict)
			}
		})
	}
}
