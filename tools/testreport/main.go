// Command testreport reads the event stream of `go test -json` on its
// standard input and writes what `go test` writes without -json (each
// package's result line, and the whole output of a test that failed),
// then a table of the slowest tests, so that every run of the suite says
// where its time goes. It exits 1 when a test, a package or a build
// failed, so that it may stand at the end of a pipe in place of go test.
//
//	go test -json ./... | go run ./tools/testreport -slowest 20
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of test2json's stream (go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build events
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

// timing is one finished top-level test.
type timing struct {
	test    string
	pkg     string
	elapsed time.Duration
	result  string
}

func main() {
	slowest := flag.Int("slowest", 20, "how many of the slowest tests to list (0: none)")
	flag.Parse()
	r := report{out: os.Stdout, outputs: map[string]*strings.Builder{}}
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		os.Exit(2)
	}
	r.table(*slowest)
	if r.failed {
		os.Exit(1)
	}
}

// report follows the stream: the output of each test until it ends, the
// timings of the top-level tests, and whether anything failed.
type report struct {
	out     io.Writer
	outputs map[string]*strings.Builder // by package and test
	timings []timing
	failed  bool
}

// read takes the stream to its end. A line that is not an event (go's
// own messages) is written as it is.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.take(ev)
	}
	r.unfinished()
	return sc.Err()
}

// unfinished writes the output of the tests that never ended: a panic or
// the timeout killed their test binary, and what they printed is what
// tells why.
func (r *report) unfinished() {
	keys := slices.Sorted(maps.Keys(r.outputs))
	for _, k := range keys {
		fmt.Fprintf(r.out, "--- UNFINISHED: %s\n%s", k, r.outputs[k])
		r.failed = true
	}
}

// take handles one event.
func (r *report) take(ev event) {
	key := ev.Package + " " + ev.Test
	switch {
	case ev.Action == "build-output":
		fmt.Fprint(r.out, ev.Output)
	case ev.Action == "build-fail":
		r.failed = true
	case ev.Test == "" && ev.Action == "output":
		// The package's own lines: its result, and what a TestMain or
		// a panic outside a test printed.
		if !strings.HasPrefix(ev.Output, "PASS\n") && !strings.HasPrefix(ev.Output, "=== ") {
			fmt.Fprint(r.out, ev.Output)
		}
	case ev.Test == "":
		r.failed = r.failed || ev.Action == "fail"
	case ev.Action == "output":
		b := r.outputs[key]
		if b == nil {
			b = &strings.Builder{}
			r.outputs[key] = b
		}
		b.WriteString(ev.Output)
	case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
		if ev.Action == "fail" {
			r.failed = true
			if b := r.outputs[key]; b != nil {
				fmt.Fprint(r.out, b.String()) // a subtest's comes before its parent's
			}
		}
		delete(r.outputs, key)
		if !strings.Contains(ev.Test, "/") {
			r.timings = append(r.timings, timing{test: ev.Test, pkg: ev.Package, result: ev.Action,
				elapsed: time.Duration(ev.Elapsed * float64(time.Second))})
		}
	}
}

// table writes the n slowest top-level tests, slowest first.
func (r *report) table(n int) {
	if n <= 0 || len(r.timings) == 0 {
		return
	}
	slices.SortStableFunc(r.timings, func(a, b timing) int { return int(b.elapsed - a.elapsed) })
	var total time.Duration
	for _, t := range r.timings {
		total += t.elapsed
	}
	fmt.Fprintf(r.out, "\nthe %d slowest of %d tests (%s in all):\n", min(n, len(r.timings)), len(r.timings), total.Round(time.Second))
	for _, t := range r.timings[:min(n, len(r.timings))] {
		fmt.Fprintf(r.out, "%9s  %-4s  %s  %s\n", t.elapsed.Round(100*time.Millisecond), t.result, t.pkg, t.test)
	}
}
