package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// bigProgram is 500 resources: the stack, the test provider, 10 parent
// Files and 488 Files under them, in dir (the config "dir").
func bigProgram() string {
	var b strings.Builder
	b.WriteString("name: e2e\nruntime: yaml\nconfiguration:\n  dir:\n    type: String\nresources:\n")
	for g := range 10 {
		fmt.Fprintf(&b, "  g%d:\n    type: stackdtest:index:File\n    properties: {path: \"${dir}/g%d\", content: g}\n", g, g)
	}
	for i := range 488 {
		fmt.Fprintf(&b, "  f%d:\n    type: stackdtest:index:File\n    properties: {path: \"${dir}/f%d\", content: f}\n    options: {parent: \"${g%d}\"}\n", i, i, i%10)
	}
	return b.String()
}

// BenchmarkStackView500 deploys a stack of 500 resources with the real
// toolchain, then measures what a look at it costs: the resources API
// under 8 concurrent clients (its 99th percentile) and the stack page
// (tree, picture, history) one request at a time. Goals: p99 under 50 ms
// and the page under 200 ms.
//
//	go test -run '^$' -bench StackView500 -benchtime 400x ./cmd/stackd/
func BenchmarkStackView500(b *testing.B) {
	r := newRepo(b)
	r.commit(map[string]string{"Pulumi.yaml": bigProgram()})
	in := startDaemon(b, "stacks:\n"+stackYAML("app", r, "    config:\n      dir: "+outDir(b)+"\n"), "")
	in.waitStack("app", "500 resources deployed", 10*time.Minute, isReady)
	var rs model.Resources
	if code, body := in.get("/api/v1/stacks/app/resources", &rs); code != http.StatusOK || len(rs.Resources) != 500 {
		b.Fatalf("GET resources: %d, %d resources\n%.300s", code, len(rs.Resources), body)
	}
	b.Run("API8Clients", func(b *testing.B) {
		report(b)(latencies(b, in.url+"/api/v1/stacks/app/resources", 8, max(b.N, 8)))
	})
	b.Run("Page", func(b *testing.B) {
		report(b)(latencies(b, in.url+"/stacks/app", 1, b.N))
	})
}

// report returns what adds a median and a 99th percentile, in ms, to b.
func report(b *testing.B) func(p50, p99 float64) {
	return func(p50, p99 float64) {
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")
	}
}
