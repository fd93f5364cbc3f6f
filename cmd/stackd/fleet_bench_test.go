package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
	"github.com/stackd/stackd/store"
	"github.com/stackd/stackd/web"
	"github.com/stackd/stackd/web/metrics"
)

// The fleet benchmarks measure the daemon's own cost at fleet size: the
// real scheduler, BoltDB store, web server and metrics, and gitwatch's
// real ls-remote against repositories served by git http-backend; the
// runner (Pulumi) and the checkouts are stood in for, as their cost is
// Pulumi's and Git's, not the daemon's.

// BenchmarkFleet1000 and BenchmarkFleet10000 run 1,000 and 10,000 stacks
// on 100 repositories and report: the time until all are deployed; over
// three polling periods while idle, the daemon's CPU (% of one core),
// the process's RSS (and of it, rss-anon, what the process allocated,
// and rss-file, its binary's pages and the store's mapped file) and Go
// heap in use, and remote calls per period; the live heap (what a
// collection leaves) then; then p50 and p99 latencies with 8 concurrent
// clients of the list (full, summary, a summary page), a stack's page
// and /metrics; and the live heap once they were all served (with the
// caches they fill).
//
// Their polling is harsh on purpose: 100 repositories each resolved
// every 10 seconds, 10 ls-remotes a second, where the idle CPU is mostly
// those (and the test's own Git server, which serves them in this
// process and counts in idle-cpu-%). BenchmarkFleet1000Defaults is the
// same fleet as operators run it: 10 repositories, the default resync
// period of 60 seconds.
func BenchmarkFleet1000(b *testing.B)  { benchFleet(b, 1000, 100, 10*time.Second) }
func BenchmarkFleet10000(b *testing.B) { benchFleet(b, 10000, 100, 10*time.Second) }
func BenchmarkFleet1000Defaults(b *testing.B) {
	benchFleet(b, 1000, 10, decide.DefaultResync)
}

func benchFleet(b *testing.B, n, fleetRepos int, fleetPeriod time.Duration) {
	if os.Getenv("STACKD_FLEET_PROFILE") != "" {
		runtime.MemProfileRate = 4096
	}
	root := b.TempDir()
	for i := range fleetRepos {
		r := &repo{t: b, dir: filepath.Join(root, fmt.Sprintf("r%03d", i))}
		r.git("init", "-q", "-b", "main", r.dir)
		r.commit(map[string]string{"Pulumi.yaml": "name: fleet\nruntime: yaml\n"})
	}
	g := newCountingGit(b, root)
	var sb strings.Builder
	sb.WriteString("stacks:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - {name: s%05d, stack: s%05d, projectRepo: %s/r%03d, branch: main, resyncFrequencySeconds: %d}\n",
			i, i, g.url, i%fleetRepos, int(fleetPeriod.Seconds()))
	}
	cfgPath := filepath.Join(root, "stacks.yaml")
	if err := os.WriteFile(cfgPath, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	src, err := spec.ParseSource(cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(root, "stackd.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	reg := prometheus.NewRegistry()
	metricSet := metrics.New(reg, nil, "bench")
	d, err := daemon.New(nil, daemon.Options{Store: st, Runner: instantRunner{}, DataDir: filepath.Join(root, "data"),
		Fetcher:       &resolveOnly{Fetcher: gitwatch.New(gitwatch.Options{CacheFor: fleetPeriod / 2, RemoteCall: metricSet.RemoteCall})},
		MaxConcurrent: 8, MinResync: fleetPeriod, Sources: []spec.Source{src}, Observer: metricSet})
	if err != nil {
		b.Fatal(err)
	}
	metricSet.SetAPI(d)
	began := time.Now()
	if err := d.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Stop(context.Background()) })
	srv := web.New(web.Options{Addr: "127.0.0.1:0", API: d, Registry: reg, Metrics: metricSet})
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop(context.Background()) })
	url := "http://" + srv.Addr()

	for {
		var healthy struct{ Total int }
		if code, err := getJSON(url+"/api/v1/stacks?view=summary&health=Healthy&limit=1", &healthy); err == nil && code == 200 && healthy.Total == n {
			break
		}
		if time.Since(began) > 15*time.Minute {
			b.Fatal("the fleet did not deploy within 15 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.ReportMetric(time.Since(began).Seconds(), "deploy-s")

	// Idle: three polling periods.
	time.Sleep(fleetPeriod) // the deploy's last polls and writes settle
	since := time.Now()
	cpu0 := cpuTime()
	stopProfile := profilePhase(b, "idle")
	time.Sleep(3 * fleetPeriod)
	stopProfile()
	cpu := cpuTime() - cpu0
	adverts, _ := g.counts(since)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(100*cpu.Seconds()/time.Since(since).Seconds(), "idle-cpu-%")
	b.ReportMetric(float64(rssBytes())/1e6, "rss-MB")
	b.ReportMetric(float64(statusKB("RssAnon")<<10)/1e6, "rss-anon-MB")
	b.ReportMetric(float64(statusKB("RssFile")<<10)/1e6, "rss-file-MB")
	b.ReportMetric(float64(ms.HeapInuse)/1e6, "heap-MB")
	b.ReportMetric(float64(len(adverts))/3, "remote-calls/period")
	b.ReportMetric(liveHeap()/1e6, "live-MB")
	profileHeap(b, "idle")

	for _, path := range []string{"/api/v1/stacks", "/api/v1/stacks?view=summary",
		"/api/v1/stacks?view=summary&limit=100&after=s00500", "/stacks/s00500", "/metrics"} {
		name := strings.NewReplacer("/api/v1/", "", "?view=summary&limit=100&after=s00500", "-page", "?view=summary", "-summary", "/", "").Replace(path)
		stopProfile := profilePhase(b, name)
		p50, p99 := latencies(b, url+path, 8, 200)
		stopProfile()
		b.ReportMetric(p50, name+"-p50-ms")
		b.ReportMetric(p99, name+"-p99-ms")
	}
	b.ReportMetric(liveHeap()/1e6, "live-served-MB")
	if dir := os.Getenv("STACKD_FLEET_PROFILE"); dir != "" {
		for file, path := range map[string]string{"list.json": "/api/v1/stacks", "summary.json": "/api/v1/stacks?view=summary"} {
			resp, err := http.Get(url + path)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(filepath.Join(dir, "fleet-"+file), body, 0o600)
		}
	}
}

// liveHeap is the Go heap's live bytes: what a collection leaves.
func liveHeap() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}

// With STACKD_FLEET_PROFILE=DIR, the fleet benchmarks write into DIR a
// CPU profile of each phase (fleet-idle.cpu, then fleet-stacks.cpu and
// so on, one per endpoint's load), a heap profile at idle
// (fleet-idle.heap, sampled every 4 KiB from the start) with the runtime's
// MemStats and /proc/self/smaps (fleet-idle.mem), and at the end the full
// and the summary list (fleet-list.json, fleet-summary.json). Profiling
// costs: the figures of such a run are not the benchmark's.
func profilePhase(b *testing.B, phase string) (stop func()) {
	dir := os.Getenv("STACKD_FLEET_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, "fleet-"+phase+".cpu"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

func profileHeap(b *testing.B, phase string) {
	if dir := os.Getenv("STACKD_FLEET_PROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, "fleet-"+phase+".heap"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rollup, _ := os.ReadFile("/proc/self/smaps")
		_ = os.WriteFile(filepath.Join(dir, "fleet-"+phase+".mem"), fmt.Appendf(nil, "%+v\n%s", ms, rollup), 0o600)
	}
}

// latencies GETs url from clients goroutines, total times in all, and
// returns the p50 and p99 in milliseconds.
func latencies(b *testing.B, url string, clients, total int) (p50, p99 float64) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range total / clients {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body) // the whole answer, JSON or a page
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("GET %s: %d (client %d)", url, resp.StatusCode, c)
					return
				}
				mu.Lock()
				took = append(took, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(took)
	at := func(q int) float64 {
		return float64(took[min(len(took)*q/100, len(took)-1)]) / float64(time.Millisecond)
	}
	return at(50), at(99)
}

// instantRunner succeeds at once: the daemon's cost without Pulumi's.
type instantRunner struct{}

func (instantRunner) Run(context.Context, model.Operation) (model.Result, error) {
	return model.Result{Changes: map[string]int{"same": 1}}, nil
}

func (instantRunner) Outputs(context.Context, model.Workspace) (map[string]any, error) {
	return map[string]any{}, nil
}

// resolveOnly resolves with gitwatch and stands in for checkouts with a
// directory holding an empty project.
type resolveOnly struct{ *gitwatch.Fetcher }

func (resolveOnly) Checkout(_ context.Context, _ model.GitSource, _, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: fleet\nruntime: yaml\n"), 0o600)
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes is the process's resident set size.
func rssBytes() int64 { return statusKB("VmRSS") << 10 }

// statusKB reads a field of /proc/self/status counted in kB: VmRSS, or
// RssAnon (the heap, stacks: what the process made) and RssFile (its
// binary's pages, and the store's mapped file).
func statusKB(field string) int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
