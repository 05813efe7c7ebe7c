package gtid

import (
	"fmt"
	"strings"
	"testing"
)

// longSet builds a gtid_executed typical of a long-lived cluster that went
// through many failovers: sources UUIDs, each with holes left by purges.
func longSet(sources, holes int, offset int) string {
	var groups []string
	for s := range sources {
		var b strings.Builder
		fmt.Fprintf(&b, "%08x-71ca-11e1-9e33-c80aa9429562", s)
		for h := range holes {
			start := h*1000 + 1 + offset
			fmt.Fprintf(&b, ":%d-%d", start, start+900)
		}
		groups = append(groups, b.String())
	}
	return strings.Join(groups, ",\n")
}

func BenchmarkParseSet(b *testing.B) {
	in := longSet(20, 20, 0)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ParseSet(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSubtract(b *testing.B) {
	x := mustSet(b, longSet(20, 20, 0))
	y := mustSet(b, longSet(20, 20, 450))
	for b.Loop() {
		if x.Subtract(y).IsEmpty() {
			b.Fatal("unexpectedly empty")
		}
	}
}

func BenchmarkContains(b *testing.B) {
	x := mustSet(b, longSet(20, 20, 0))
	y := mustSet(b, longSet(20, 20, 0))
	for b.Loop() {
		if !x.Contains(y) {
			b.Fatal("should contain")
		}
	}
}

func BenchmarkParseMariaDBPos(b *testing.B) {
	in := "0-1-123456789,1-2-42,2-3-7,10-1-99999"
	for b.Loop() {
		if _, err := ParseMariaDBPos(in); err != nil {
			b.Fatal(err)
		}
	}
}
