package gitwatch

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkCheckoutMemory checks generated repositories of highly
// compressible files out in a child process, with no limits and with the
// default ones, and reports the child's peak RSS, the bytes it wrote and
// those left in the checkout's parent directory.
// STACKD_BENCH_REPO_MIB sets the size of each repository (default 256;
// the security review's case is 1024; 448 is the largest the default
// limits let through). It takes minutes: select with -bench, e.g.
// 'BenchmarkCheckoutMemory/.*/default-limits'.
func BenchmarkCheckoutMemory(b *testing.B) {
	total := int64(256)
	if v := os.Getenv("STACKD_BENCH_REPO_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total = n
	}
	shapes := []struct {
		name   string
		files  []bigFile
		deltas bool
	}{
		{"one-file", []bigFile{{name: "big.txt", size: total * mib}}, false},
		{"32MiB-files", spread(total*mib, 32*mib), false},
		{"16MiB-files-deltas", spread(total*mib, 16*mib), true},
		{"32MiB-files-deltas", spread(total*mib, 32*mib), true},
		{"64MiB-files-deltas", spread(total*mib, 64*mib), true},
	}
	limits := []struct {
		name          string
		checkout, max int64
	}{
		{"no-limits", -1, -1},
		{"default-limits", 0, 0},
		{"max-file-16MiB", 0, 16 * mib},
	}
	for _, sh := range shapes {
		root := b.TempDir()
		commit := buildBigRepo(b, root, sh.files, sh.deltas)
		srv := newGitServer(b, root, "")
		for _, lim := range limits {
			b.Run(sh.name+"/"+lim.name, func(b *testing.B) {
				var res childResult
				for i := 0; i < b.N; i++ {
					dir := filepath.Join(b.TempDir(), "w")
					res = runChild(b, childJob{URL: srv.repoURL(), Commit: commit, Dir: dir,
						MaxCheckout: lim.checkout, MaxFile: lim.max})
				}
				b.ReportMetric(float64(res.StartRSSKiB)/1024, "start-MiB")
				b.ReportMetric(float64(res.PeakRSSKiB)/1024, "peak-rss-MiB")
				b.ReportMetric(float64(res.PeakHeap)/mib, "heap-sys-MiB")
				b.ReportMetric(float64(res.WriteBytes)/mib, "written-MiB")
				b.ReportMetric(float64(res.DirBytes)/mib, "left-MiB")
				if res.Err != "" {
					b.Logf("refused: %s", res.Err)
				}
			})
		}
	}
}

// spread splits total bytes into files of at most each bytes.
func spread(total, each int64) []bigFile {
	var out []bigFile
	for i := 0; total > 0; i++ {
		n := min(total, each)
		out = append(out, bigFile{name: "data/f" + strconv.Itoa(i) + ".txt", size: n})
		total -= n
	}
	return out
}
