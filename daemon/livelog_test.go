package daemon

import (
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
