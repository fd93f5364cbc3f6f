package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// TestE2ECheckoutOverLimit: a commit with a file over --max-file-bytes
// is not checked out; the stack says why, and the checkout and the
// deployment of the commit before stay as they were.
func TestE2ECheckoutOverLimit(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	first := r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "", func(f *runFlags) {
		f.maxFile = 1 << 20
	})
	in.waitStack("app", "first deploy", time.Minute, isReady)

	r.commit(map[string]string{"Pulumi.yaml": program("v2"), "assets/big.bin": strings.Repeat("compressible ", 200_000)})
	v := in.waitStack("app", "the large commit refused", time.Minute, stalledFor(model.ReasonSourceUnavailable))
	msg := v.Status.Condition(model.ConditionStalled).Message
	if !strings.Contains(msg, "2600000 bytes (2.5 MiB), more than --max-file-bytes 1048576 bytes (1.0 MiB)") {
		t.Fatalf("message %q does not say what is too large", msg)
	}
	t.Logf("refused: %s", msg)
	src := filepath.Join(in.flags.dataDir, "stacks", "app", "src")
	if head := r.git("-C", src, "rev-parse", "HEAD"); head != first {
		t.Fatalf("the checkout moved to %s", head)
	}
	if _, err := os.Stat(filepath.Join(src, "assets")); !os.IsNotExist(err) {
		t.Fatalf("the large file was written: %v", err)
	}
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q, want the first commit's deployment", got)
	}
}
