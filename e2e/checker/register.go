package checker

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// The register: clients read and write a few keys, each write with a value
// never written before, and record each operation's invocation and
// return. The history is linearizable when some order of the operations,
// each taking effect between its invocation and its return, explains every
// read: no read sees a value older than a write acknowledged before the
// read began, or a write that was never made. porcupine decides it.

// RegisterOp is one operation on one key. A key never written reads 0.
type RegisterOp struct {
	Client int
	Key    int64
	// Write: the op wrote Value; otherwise it read Value.
	Write bool
	Value int64
	// Call and Return bound the op as the client saw it.
	Call, Return time.Time
	// Failed: the client got no answer or an error. A failed read says
	// nothing and is left out; a failed write may still have happened
	// (its commit may have been lost on the way back), so it stays in the
	// history as one that may take effect at any time after its call.
	Failed bool
}

// RegisterReport is the register's verdict.
type RegisterReport struct {
	// Ops: operations in the checked history (failed reads left out);
	// Unsure: failed writes among them.
	Ops, Unsure int
	// Verdict is porcupine's: Ok, Illegal, or Unknown when it ran out of
	// time.
	Verdict porcupine.CheckResult
}

type regInput struct {
	key   int64
	write bool
	value int64
}

// registerModel is a map of independent registers, checked key by key.
var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int64][]porcupine.Operation{}
		var keys []int64
		for _, op := range h {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.value
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("put(%d, %d)", in.key, in.value)
		}
		return fmt.Sprintf("get(%d) -> %d", in.key, output.(int64))
	},
}

// CheckRegister runs porcupine on the history, for at most timeout.
func CheckRegister(ops []RegisterOp, timeout time.Duration) RegisterReport {
	var r RegisterReport
	h := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Failed && !op.Write {
			continue
		}
		ret := op.Return.UnixNano()
		if op.Failed {
			r.Unsure++
			ret = math.MaxInt64
		}
		h = append(h, porcupine.Operation{ClientId: op.Client, Input: regInput{op.Key, op.Write, op.Value},
			Call: op.Call.UnixNano(), Output: op.Value, Return: ret})
	}
	r.Ops = len(h)
	r.Verdict = porcupine.CheckOperationsTimeout(registerModel, h, timeout)
	return r
}

// Violations: a history porcupine proved not linearizable. One it could
// not decide in time is reported by its verdict, not failed.
func (r RegisterReport) Violations() []string {
	if r.Verdict == porcupine.Illegal {
		return []string{fmt.Sprintf("the register history (%d operations, %d unsure writes) is not linearizable", r.Ops, r.Unsure)}
	}
	return nil
}
