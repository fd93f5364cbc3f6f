package daemon

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// TestPreviewNowWhilePaused: with the daemon paused and a new commit on
// the branch, a preview runs at that commit, read-only with a diff, and
// is kept as the stack's last preview; the stack's status, history and
// resources stay as they were.
func TestPreviewNowWhilePaused(t *testing.T) {
	h := newHarness(t, oneStack, nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("first deploy", func() bool { return h.ready("app") })
	h.d.Pause()
	before, _ := h.d.Stack("app")
	updates := len(h.store.updatesOf("app"))
	h.fetcher.set("https://git.example/app.git", sha2, nil)
	if _, err := h.d.LastPreview("app"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("LastPreview before any = %v, want ErrNotFound", err)
	}
	if err := h.d.PreviewNow("app"); err != nil {
		t.Fatal(err)
	}
	var p model.StackPreview
	h.eventually("the preview", func() bool {
		var err error
		p, err = h.d.LastPreview("app")
		return err == nil && p.State != model.UpdateRunning
	})
	if p.State != model.UpdateSucceeded || p.Commit != sha2 || p.Diff != "running preview of app\n" {
		t.Errorf("preview = %+v, want a success at %s with the runner's output", p, sha2)
	}
	ops := h.runner.opsOf("app")
	if op := ops[len(ops)-1]; op.Type != model.UpdatePreview || !op.ReadOnly || !op.Diff || op.Export {
		t.Errorf("the preview ran %+v, want a read-only preview with a diff that exports nothing", op)
	}
	after, _ := h.d.Stack("app")
	if !reflect.DeepEqual(before.Status, after.Status) || len(h.store.updatesOf("app")) != updates {
		t.Errorf("the preview changed the stack: status %+v, then %+v", before.Status, after.Status)
	}
	if err := h.d.PreviewNow("nope"); !errors.Is(err, ErrUnknownStack) {
		t.Errorf("PreviewNow(nope) = %v", err)
	}
}
