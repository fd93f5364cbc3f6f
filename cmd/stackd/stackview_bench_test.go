package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
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
	in := startDaemon(b, "stacks:\n"+stackYAML("app", r, "    config:\n      dir: "+b.TempDir()+"\n"), "")
	in.waitStack("app", "500 resources deployed", 10*time.Minute, isReady)
	var rs daemon.Resources
	if code, body := in.get("/api/v1/stacks/app/resources", &rs); code != http.StatusOK || len(rs.Resources) != 500 {
		b.Fatalf("GET resources: %d, %d resources\n%.300s", code, len(rs.Resources), body)
	}
	b.Run("API8Clients", func(b *testing.B) {
		lat := measure(b, 8, in.url+"/api/v1/stacks/app/resources")
		report(b, lat)
	})
	b.Run("Page", func(b *testing.B) {
		lat := measure(b, 1, in.url+"/stacks/app")
		report(b, lat)
	})
}

// measure GETs url b.N times from clients concurrent clients and returns
// every request's latency.
func measure(b *testing.B, clients int, url string) []time.Duration {
	b.Helper()
	var (
		mu   sync.Mutex
		lat  = make([]time.Duration, 0, b.N)
		next = make(chan struct{}, b.N)
		wg   sync.WaitGroup
	)
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: time.Minute}
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for range next {
				start := time.Now()
				if err := getOK(client, url); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(start)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	return lat
}

// getOK GETs url and reads the whole answer, which must be a 200.
func getOK(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// report adds the latencies' median and 99th percentile, in ms.
func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
