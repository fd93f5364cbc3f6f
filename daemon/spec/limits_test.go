package spec

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

const stackDoc = `apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: %s}
spec: {stack: dev, projectRepo: https://git.example/app.git, branch: main}
`

// TestSourceBytes: a source's files are bounded together, from their
// sizes before any is read; a file over MaxConfigFileSize is refused
// from its size as well.
func TestSourceBytes(t *testing.T) {
	dir := t.TempDir()
	var total int64
	for _, name := range []string{"a", "b"} {
		doc := fmt.Sprintf(stackDoc, name)
		total += int64(len(doc))
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A checkout of a Git source, read through its root.
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "env"), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		in   Input
		want string // "" for no error
	}{
		{"at the limit", Input{Source: "local", Path: dir, MaxBytes: total}, ""},
		{"no limit", Input{Source: "local", Path: dir, MaxBytes: -1}, ""},
		{"default limit", Input{Source: "local", Path: dir}, ""},
		{"over", Input{Source: "local", Path: dir, MaxBytes: total - 1},
			fmt.Sprintf("config source local is %d bytes, more than --max-config-bytes %d bytes; not read", total, total-1)},
		{"one file over", Input{Source: "local", Path: filepath.Join(dir, "a.yaml"), MaxBytes: 10},
			"config source local is "},
		{"git checkout over", Input{Source: "git+https://git.example/m.git//env", Path: filepath.Join(root, "env"),
			Root: root, Shown: "https://git.example/m.git//env", MaxBytes: total - 1},
			"https://git.example/m.git//env: config source git+https://git.example/m.git//env is "},
		{"git checkout within", Input{Source: "git", Path: filepath.Join(root, "env"), Root: root, MaxBytes: total}, ""},
	} {
		cfg, diags, err := LoadInputs([]Input{c.in})
		switch {
		case c.want == "" && (err != nil || len(cfg.Stacks) != 2):
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		case c.want != "" && len(diags) != 1:
			t.Errorf("%s: %d problems, want the size alone: %v", c.name, len(diags), err)
		}
	}
}

// TestSourceBytesNotRead: files whose sizes are over a limit are not
// read: sparse files of zeros, which would be refused as binary data if
// they were.
func TestSourceBytesNotRead(t *testing.T) {
	dir := t.TempDir()
	sparse := func(name string, size int64) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a.yaml", "b.yaml", "c.yaml"} {
		sparse(name, 7<<20)
	}
	_, _, err := Load(dir)
	want := fmt.Sprintf("config source %s is 22020096 bytes (21.0 MiB), more than --max-config-bytes 16777216 bytes (16.0 MiB); not read", dir)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "binary") {
		t.Fatalf("got %v, want %q", err, want)
	}
	sparse("d.yaml", MaxConfigFileSize+1)
	_, _, err = LoadInputs([]Input{{Source: "big", Path: filepath.Join(dir, "d.yaml"), MaxBytes: -1}})
	want = "d.yaml: 8388609 bytes (8.0 MiB), more than 8388608 bytes (8.0 MiB) (the limit of one config file)"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "binary") {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// writeBigConfigs writes n ConfigMap documents of about size bytes each
// (one long block scalar) into dir.
func writeBigConfigs(tb testing.TB, dir string, n int, size int64) {
	tb.Helper()
	line := "      a line of a large config value, repeated to fill the file\n"
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cm%03d.yaml", i)))
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriter(f)
		head := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\ndata:\n  big: |\n", i)
		w.WriteString(head)
		for written := int64(len(head)); written+int64(len(line)) <= size; written += int64(len(line)) {
			w.WriteString(line)
		}
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkLoadLargeSource loads a directory of 40 files of just under
// 8 MiB (the security review's case; STACKD_BENCH_CONFIG_FILES sets the
// count: 2 is the largest source the default limit lets through) and
// reports the bytes allocated per load and the peak heap.
func BenchmarkLoadLargeSource(b *testing.B) {
	n := 40
	if v := os.Getenv("STACKD_BENCH_CONFIG_FILES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	writeBigConfigs(b, dir, n, MaxConfigFileSize-4096)
	b.ReportAllocs()
	peak := sampleHeap()
	b.ResetTimer()
	var err error
	for i := 0; i < b.N; i++ {
		_, _, err = Load(dir)
	}
	b.StopTimer()
	b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MiB")
	b.Logf("load: %v", firstLine(err))
}

// sampleHeap samples HeapInuse every 5ms until the returned func is
// called, which returns the highest value seen.
func sampleHeap() func() uint64 {
	done := make(chan struct{})
	result := make(chan uint64)
	go func() {
		var hi uint64
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			hi = max(hi, ms.HeapInuse)
			select {
			case <-done:
				result <- hi
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-result }
}

// firstLine is the first problem of err.
func firstLine(err error) string {
	if err == nil {
		return "ok"
	}
	lines := strings.SplitN(err.Error(), "\n", 3)
	return strings.Join(lines[:min(2, len(lines))], " ")
}
