package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	in := `{"Action":"run","Package":"p/a","Test":"TestFast"}
{"Action":"output","Package":"p/a","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Action":"output","Package":"p/a","Test":"TestFast","Output":"    a_test.go:1: said while passing\n"}
{"Action":"output","Package":"p/a","Test":"TestFast","Output":"    a_test.go:2: verdict: trial 1: 10 acked, 0 lost\n"}
{"Action":"pass","Package":"p/a","Test":"TestFast","Elapsed":0.5}
{"Action":"output","Package":"p/a","Test":"TestSlow","Output":"    a_test.go:9: the reason it failed\n"}
{"Action":"output","Package":"p/a","Test":"TestSlow/sub","Output":"    sub detail\n"}
{"Action":"fail","Package":"p/a","Test":"TestSlow/sub","Elapsed":2}
{"Action":"fail","Package":"p/a","Test":"TestSlow","Elapsed":12.25}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t12.8s\n"}
{"Action":"fail","Package":"p/a","Elapsed":12.8}
{"Action":"output","Package":"p/b","Output":"?   \tp/b\t[no test files]\n"}
{"Action":"skip","Package":"p/b","Elapsed":0}
# p/c
c.go:1: undefined: x
{"Action":"output","Package":"p/d","Output":"ok  \tp/d\t3.1s\n"}
{"Action":"pass","Package":"p/d","Elapsed":3.1}
`
	var out strings.Builder
	failed, err := run(strings.NewReader(in), &out, 1)
	if err != nil || !failed {
		t.Fatalf("run = %v, %v; want failed", failed, err)
	}
	got := out.String()
	for _, want := range []string{
		"the reason it failed", "sub detail", "FAIL\tp/a", "[no test files]", "undefined: x", "ok  \tp/d",
		"time by package (sum 16s):\n     12.8s  p/a (outside its tests 100ms)  FAIL\n      3.1s  p/d (outside its tests 3.1s)\n",
		"the 1 slowest tests (sum 13s):\n     12.3s  p/a TestSlow  FAIL\n",
		"the scenarios' verdicts (1):\n  p/a TestFast: trial 1: 10 acked, 0 lost\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "said while passing") || strings.Contains(got, "=== RUN") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}
