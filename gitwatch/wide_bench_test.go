package gitwatch

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// BenchmarkCheckoutWide checks out, over file://, a commit whose
// directory envs holds n subdirectories of one small file each, and
// reports ms and allocated bytes per checkout: the growth between the
// widths shows whether a checkout is linear in a directory's width.
func BenchmarkCheckoutWide(b *testing.B) {
	for _, n := range []int{2000, 10000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			root := b.TempDir()
			commit := buildBigRepo(b, root, wideFiles(n), false)
			src := model.GitSource{URL: "file://" + filepath.Join(root, "repo"), Ref: "main"}
			f := New(Options{})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(b.TempDir(), "w")
				if _, err := f.Checkout(context.Background(), src, commit, dir); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/checkout")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "alloc-B/checkout")
		})
	}
}

// wideFiles is envs/e00000/values.yaml … envs/e<n-1>/values.yaml.
func wideFiles(n int) []bigFile {
	files := make([]bigFile, n)
	for i := range files {
		files[i] = bigFile{name: fmt.Sprintf("envs/e%05d/values.yaml", i), data: fmt.Appendf(nil, "n: %d\n", i)}
	}
	return files
}
