package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// BenchmarkReload1000Stacks reloads a 1,000-stack config in which one
// stack changed, and reports the reload time and the heap in use after
// it (the daemon's memory for that many stacks).
func BenchmarkReload1000Stacks(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "stacks.yaml")
	write := func(version int) string {
		var sb strings.Builder
		sb.WriteString("stacks:\n")
		for i := range 1000 {
			v := 0
			if i == 0 {
				v = version
			}
			fmt.Fprintf(&sb, "  - name: s%d\n    stack: dev\n    projectRepo: https://git.example/s%d.git\n    branch: main\n    config: {version: \"%d\"}\n",
				i, i, v)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		return sb.String()
	}
	text := write(0)
	store, fetcher, runner := newMemStore(), &fakeFetcher{commits: map[string]string{}}, &fakeRunner{fail: map[string]error{}}
	cfg, _, err := spec.Parse(path, []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	// Polling is off (an hour), so the benchmark measures reloads only.
	d, err := New(cfg, Options{Store: store, Fetcher: fetcher, Runner: runner, DataDir: dir,
		Sources: []spec.Source{{Path: path}}, pollEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer d.Stop(context.Background())
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		write(i + 1)
		b.StartTimer()
		if err := d.Reload(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MB")
	b.ReportMetric(float64(m.Sys)/(1<<20), "sys-MB")
}
