package gitwatch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// bigFile is a file of a generated repository: data, or else size bytes
// of highly compressible text (zlib packs 1 GiB of it into about 3 MB).
type bigFile struct {
	name string
	size int64
	data []byte
}

// buildBigRepo creates root/repo with one commit on main holding
// Pulumi.yaml and files, streamed through git fast-import so that no
// worktree copy is ever written, into one pack that the server sends as
// it is (pack.window 0: no delta search per fetch). With deltas, each
// blob is stored as a delta against the one before it, as git would
// send similar files; otherwise every blob is whole. It returns the
// commit.
func buildBigRepo(tb testing.TB, root string, files []bigFile, deltas bool) string {
	tb.Helper()
	path := filepath.Join(root, "repo")
	if err := os.MkdirAll(path, 0o755); err != nil {
		tb.Fatal(err)
	}
	gitRun(tb, path, "init", "-q", "-b", "main")
	gitRun(tb, path, "config", "pack.window", "0")
	args := []string{"-c", "fastimport.unpackLimit=1", "fast-import", "--quiet"}
	if !deltas {
		args = append(args, "--big-file-threshold=1m")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = path
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	werr := writeFastImport(stdin, files)
	stdin.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		tb.Fatalf("git fast-import: %v %v\n%s", err, werr, stderr.String())
	}
	return gitRun(tb, path, "rev-parse", "refs/heads/main")
}

func writeFastImport(w io.Writer, files []bigFile) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	all := append([]bigFile{{name: "Pulumi.yaml", data: []byte("name: big\nruntime: yaml\n")}}, files...)
	for i, f := range all {
		fmt.Fprintf(bw, "blob\nmark :%d\n", i+1)
		if f.data != nil {
			fmt.Fprintf(bw, "data %d\n%s\n", len(f.data), f.data)
			continue
		}
		fmt.Fprintf(bw, "data %d\n", f.size)
		if err := writeCompressible(bw, i-1, f.size); err != nil { // files[i-1]
			return err
		}
		bw.WriteString("\n")
	}
	fmt.Fprintf(bw, "commit refs/heads/main\ncommitter t <t@example.com> 0 +0000\ndata 4\nbig\n")
	for i, f := range all {
		fmt.Fprintf(bw, "M 100644 :%d %s\n", i+1, f.name)
	}
	bw.WriteString("\n")
	return bw.Flush()
}

// compressible returns what writeCompressible writes.
func compressible(file int, size int64) []byte {
	var b bytes.Buffer
	_ = writeCompressible(&b, file, size)
	return b.Bytes()
}

// writeCompressible writes size bytes of repeated lines that differ
// between files (so that no two blobs are equal).
func writeCompressible(w io.Writer, file int, size int64) error {
	line := fmt.Appendf(nil, "file %06d: a line of highly compressible text, repeated\n", file)
	chunk := bytes.Repeat(line, (64<<10)/len(line))
	for size > 0 {
		n := min(size, int64(len(chunk)))
		if _, err := w.Write(chunk[:n]); err != nil {
			return err
		}
		size -= n
	}
	return nil
}

// childEnv carries a checkout for a child process to make and measure.
const childEnv = "STACKD_GITWATCH_CHECKOUT_CHILD"

// childJob is what the child checks out, with which limits.
type childJob struct {
	URL, Commit, Dir     string
	MaxCheckout, MaxFile int64 // Options.MaxCheckoutBytes, MaxFileBytes
}

// childResult is what the child measured of its own process.
type childResult struct {
	StartRSSKiB int64  // VmRSS before the checkout
	PeakRSSKiB  int64  // VmHWM after it
	WriteBytes  int64  // write_bytes of /proc/self/io (page cache dirtied, even if deleted later) during the checkout
	DirBytes    int64  // size of the files left in the parent of Dir
	PeakHeap    uint64 // HeapSys after the checkout (heap reserved)
	Err         string
}

// TestCheckoutChild is the measured process of BenchmarkCheckoutMemory:
// it runs only as that benchmark's child.
func TestCheckoutChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("run by BenchmarkCheckoutMemory")
	}
	var job childJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		t.Fatal(err)
	}
	res := childResult{StartRSSKiB: procStatus(t, "VmRSS")}
	w0 := procIO(t, "write_bytes")
	f := New(Options{MaxCheckoutBytes: job.MaxCheckout, MaxFileBytes: job.MaxFile, Timeout: 10 * time.Minute})
	_, err := f.Checkout(context.Background(), model.GitSource{URL: job.URL, Ref: "main", Shallow: true}, job.Commit, job.Dir)
	if err != nil {
		res.Err = err.Error()
	}
	res.WriteBytes = procIO(t, "write_bytes") - w0
	res.PeakRSSKiB = procStatus(t, "VmHWM")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.PeakHeap = ms.HeapSys
	res.DirBytes = treeBytes(t, filepath.Dir(job.Dir))
	out, _ := json.Marshal(res)
	fmt.Printf("\nCHILD %s\n", out)
}

// runChild runs TestCheckoutChild in a new process and returns what it
// measured.
func runChild(tb testing.TB, job childJob) childResult {
	tb.Helper()
	spec, _ := json.Marshal(job)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckoutChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(l, "CHILD "); ok {
			var res childResult
			if err := json.Unmarshal([]byte(js), &res); err != nil {
				tb.Fatal(err)
			}
			return res
		}
	}
	tb.Fatalf("child printed no result:\n%s", out)
	return childResult{}
}

// procStatus reads a kB field of /proc/self/status.
func procStatus(tb testing.TB, field string) int64 {
	return procField(tb, "/proc/self/status", field)
}

// procIO reads a field of /proc/self/io.
func procIO(tb testing.TB, field string) int64 {
	return procField(tb, "/proc/self/io", field)
}

func procField(tb testing.TB, file, field string) int64 {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Skipf("no %s: %v", file, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("%s has no %s", file, field)
	return 0
}

// treeBytes sums the sizes of the regular files below dir.
func treeBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
