package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// TestFailedUpdateLogHoldsTheError: a failed update's log ends with its
// error, and terminal escapes reach neither the log nor the message.
func TestFailedUpdateLogHoldsTheError(t *testing.T) {
	h := newHarness(t, oneStack, func(o *Options) { o.MaxFailures = 1 })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.setFail("app", errors.New("\x1b[31merror:\x1b[0m program failed"))
	h.start()
	h.eventually("failed", func() bool { l := h.last("app"); return l != nil && l.State == model.UpdateFailed })
	u := h.store.updatesOf("app")[0]
	h.store.mu.Lock()
	log := string(h.store.logs[u.ID])
	h.store.mu.Unlock()
	if !strings.HasSuffix(log, "error: error: program failed\n") || strings.Contains(log+u.Message, "\x1b") {
		t.Fatalf("log %q, message %q", log, u.Message)
	}
}
