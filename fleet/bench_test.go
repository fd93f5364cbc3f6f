package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
)

var (
	bigOnce sync.Once
	bigRepo *repo
)

// repo10k is a repository of 10,000 directories envs/e00000..e09999,
// each holding a small file, built once per run.
func repo10k(b *testing.B) *repo {
	bigOnce.Do(func() {
		// Under TestMain's temporary home, removed at the end of the run:
		// the repository outlives the sub-benchmarks' temp dirs.
		r := &repo{tb: b, dir: filepath.Join(os.Getenv("HOME"), "bench-repo")}
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			b.Fatal(err)
		}
		r.git("init", "-q", "-b", "main")
		files := make(map[string]string, 10000)
		for i := range 10000 {
			files[fmt.Sprintf("envs/e%05d/values.yaml", i)] = fmt.Sprintf("n: %d\n", i)
		}
		r.write(files)
		r.commit()
		bigRepo = r
	})
	if bigRepo == nil {
		b.Fatal("the repository failed to build")
	}
	return bigRepo
}

// BenchmarkDirectories10k measures a full Expand of a directories
// generator over 10,000 directories: first with the checkout, then at
// the same commit (the steady state of a reload). It reports the time
// of one expansion, the bytes it allocates, the heap the expander holds
// after it, and the Resolve calls per expansion (one per repository).
func BenchmarkDirectories10k(b *testing.B) {
	r := repo10k(b)
	set := newSet("big", dirsGen(r.url(), inc("envs/*")))
	fetcher := gitwatch.New(gitwatch.Options{Timeout: time.Minute})
	b.Run("first", func(b *testing.B) {
		g := &countingGit{Git: fetcher}
		var xs []*Expander
		defer func() { xs = nil }()
		measure(b, g, func() {
			b.StopTimer()
			x := New(Options{Git: g, Dir: filepath.Join(b.TempDir(), "stacksets")})
			xs = append(xs, x) // kept: heap-B counts every expander's output
			b.StartTimer()
			expandOnce(b, x, set)
		})
	})
	b.Run("steady", func(b *testing.B) {
		g := &countingGit{Git: fetcher}
		x := New(Options{Git: g, Dir: filepath.Join(b.TempDir(), "stacksets")})
		expandOnce(b, x, set) // the checkout
		g.resolves.Store(0)
		measure(b, g, func() { expandOnce(b, x, set) })
	})
}

// BenchmarkStacks10k loads a config whose StackSet's directories
// generator yields 10,000 directories, as a reload does at the same
// commit: the generator's expansion, each stack rendered from the
// template, and the whole config validated. It reports ms/load, the bytes
// a load allocates and the stacks it makes (10,000).
func BenchmarkStacks10k(b *testing.B) {
	r := repo10k(b)
	cfg := filepath.Join(b.TempDir(), "stackd.yaml")
	doc := `stackSets:
  - name: big
    generators:
      - git:
          repoURL: ` + r.url() + `
          revision: main
          directories: [{path: envs/*}]
    template:
      metadata:
        name: 'app-{{.path.basename}}'
        labels: {env: '{{.path.basename}}'}
      spec:
        stack: 'app-{{.path.basename}}'
        projectRepo: https://example.com/app.git
        repoDir: '{{.path.path}}'
        branch: main
        config: {name: '{{.path.basenameNormalized}}'}
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	x := New(Options{Git: gitwatch.New(gitwatch.Options{Timeout: time.Minute}), Dir: filepath.Join(b.TempDir(), "stacksets")})
	in := []spec.Input{{Source: cfg, Path: cfg}}
	load := func() int {
		c, _, err := spec.LoadInputsExpanding(in, x.Expand)
		if err != nil {
			b.Fatal(err)
		}
		return len(c.Stacks)
	}
	load() // the checkout
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	stacks := 0
	for range b.N {
		stacks = load()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	if stacks != 10000 {
		b.Fatalf("%d stacks, want 10000", stacks)
	}
	n := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/n, "ms/load")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "alloc-B/load")
	b.ReportMetric(float64(stacks), "stacks")
}

func expandOnce(b *testing.B, x *Expander, set *spec.StackSet) {
	out, err := x.Expand(set)
	if err != nil {
		b.Fatal(err)
	}
	if len(out) != 10000 {
		b.Fatalf("%d parameter sets, want 10000", len(out))
	}
}

// measure runs expand b.N times and reports ms/expand, alloc-B/expand,
// heap-B (live heap growth after the runs, the kept outputs included)
// and resolves/expand.
func measure(b *testing.B, g *countingGit, expand func()) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		expand()
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	runtime.ReadMemStats(&after)
	allocs := after.TotalAlloc - before.TotalAlloc
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	b.ReportMetric(float64(elapsed.Microseconds())/1000/n, "ms/expand")
	b.ReportMetric(float64(allocs)/n, "alloc-B/expand")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "heap-B")
	b.ReportMetric(float64(g.resolves.Load())/n, "resolves/expand")
}
