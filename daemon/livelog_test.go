package daemon

import (
	"errors"
	"strings"
	"testing"
)

// TestScrubberLongLine: output without newlines is cut once it is long,
// and a secret straddling the cut is still scrubbed.
func TestScrubberLongLine(t *testing.T) {
	const secret = "CANARY-0123456789abcdef"
	for _, at := range []int{maxPartial - 5, maxPartial, maxPartial + 2} {
		var out strings.Builder
		s := newScrubber(&out, []string{secret})
		text := strings.Repeat("x", at) + secret + strings.Repeat("y", 70<<10)
		for i := 0; i < len(text); i += 5 {
			_, _ = s.Write([]byte(text[i:min(i+5, len(text))]))
		}
		if len(s.partial) > maxPartial {
			t.Errorf("holds %d bytes of a line", len(s.partial))
		}
		s.Close()
		if got := out.String(); strings.Contains(got, "CANARY") || !strings.Contains(got, "[secret]") {
			t.Errorf("secret at %d: the log shows it or lost it", at)
		}
	}
}

// TestFailedUpdateLogHoldsTheError: a failed update's log ends with its
// error, and terminal escapes reach neither the log nor the message.
func TestFailedUpdateLogHoldsTheError(t *testing.T) {
	h := newHarness(t, oneStack, func(o *Options) { o.MaxFailures = 1 })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.setFail("app", errors.New("\x1b[31merror:\x1b[0m program failed"))
	h.start()
	h.eventually("failed", func() bool { l := h.last("app"); return l != nil && l.State == UpdateFailed })
	u := h.store.updatesOf("app")[0]
	h.store.mu.Lock()
	log := string(h.store.logs[u.ID])
	h.store.mu.Unlock()
	if !strings.HasSuffix(log, "error: error: program failed\n") || strings.Contains(log+u.Message, "\x1b") {
		t.Fatalf("log %q, message %q", log, u.Message)
	}
}
