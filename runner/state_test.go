package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// toSharedBackend moves the stack's own file backend back into the data
// dir's shared one, as a data dir of a version before stacks had their
// own: the layout Pulumi's file backend writes.
func toSharedBackend(t *testing.T, h *harness) (own, shared string) {
	t.Helper()
	owns, _ := filepath.Glob(filepath.Join(h.dataDir, "backends", "*"))
	if len(owns) != 1 {
		t.Fatalf("own backends %v, want one", owns)
	}
	own, shared = owns[0], filepath.Join(h.dataDir, "backend")
	if err := os.RemoveAll(shared); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(own, shared); err != nil {
		t.Fatal(err)
	}
	return own, shared
}

// countFiles counts the regular files below dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestMoveStateFromSharedBackend: a stack whose state an older data dir
// keeps in the shared file backend goes on from it, in its own backend:
// the next up changes nothing, its history is kept, and the shared
// backend holds nothing of it any more. A move interrupted half-way (the
// history moved, not the checkpoint) is finished by the next operation.
func TestMoveStateFromSharedBackend(t *testing.T) {
	for _, interrupted := range []bool{false, true} {
		h := newHarness(t, testProgram)
		up := model.Operation{Workspace: h.workspace("one", secretOne), Type: model.UpdateUp}
		h.run(up)
		own, shared := toSharedBackend(t, h)
		history := filepath.Join(".pulumi", "history", "runnertest", "dev")
		before := countFiles(t, filepath.Join(shared, history))
		if before == 0 {
			t.Fatalf("no history in %s", filepath.Join(shared, history))
		}
		if interrupted {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(own, history)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(shared, history), filepath.Join(own, history)); err != nil {
				t.Fatal(err)
			}
		}

		res := h.run(up)
		if res.Changes["same"] != 2 || len(res.Changes) != 1 {
			t.Errorf("interrupted=%v: the up after the move changed %v, want 2 same", interrupted, res.Changes)
		}
		wantOutputs(t, res, `"one"`)
		if _, err := os.Stat(filepath.Join(own, ".pulumi", "stacks", "runnertest", "dev.json")); err != nil {
			t.Errorf("interrupted=%v: the checkpoint is not in the stack's own backend: %v", interrupted, err)
		}
		if left, _ := filepath.Glob(filepath.Join(shared, ".pulumi", "stacks", "runnertest", "dev.json*")); len(left) > 0 {
			t.Errorf("interrupted=%v: the shared backend still holds %v", interrupted, left)
		}
		if after := countFiles(t, filepath.Join(own, history)); after <= before {
			t.Errorf("interrupted=%v: %d history files after the move and an update, %d before", interrupted, after, before)
		}
	}
}
