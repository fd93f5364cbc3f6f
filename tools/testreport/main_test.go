package main

import (
	"strings"
	"testing"
)

// TestReport: the result lines and a failed test's output are written, a
// passed test's output is not, the table lists top-level tests slowest
// first, and a failure anywhere fails the report.
func TestReport(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestQuick"}`,
		`{"Action":"output","Package":"p","Test":"TestQuick","Output":"quiet log\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestQuick","Elapsed":0.5}`,
		`{"Action":"run","Package":"p","Test":"TestSlow"}`,
		`{"Action":"output","Package":"p","Test":"TestSlow/sub","Output":"sub log\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestSlow/sub","Elapsed":2}`,
		`{"Action":"output","Package":"p","Test":"TestSlow","Output":"--- FAIL: TestSlow (3.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestSlow","Elapsed":3}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t3.5s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":3.5}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.1s\n"}`,
		`{"Action":"pass","Package":"q","Elapsed":0.1}`,
		`not an event`,
		`{"Action":"run","Package":"r","Test":"TestHangs"}`,
		`{"Action":"output","Package":"r","Test":"TestHangs","Output":"panic: test timed out\n"}`,
	}, "\n")
	var out strings.Builder
	r := report{out: &out, outputs: map[string]*strings.Builder{}}
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r.table(5)
	got := out.String()
	for _, want := range []string{"sub log\n", "--- UNFINISHED: r TestHangs\npanic: test timed out\n", "--- FAIL: TestSlow (3.00s)\n", "FAIL\tp\t3.5s\n", "ok  \tq\t0.1s\n", "not an event\n",
		"the 2 slowest of 2 tests (4s in all):\n       3s  fail  p  TestSlow\n    500ms  pass  p  TestQuick\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet log") {
		t.Errorf("a passed test's output is in the report:\n%s", got)
	}
	if !r.failed {
		t.Error("a failed test did not fail the report")
	}
}
