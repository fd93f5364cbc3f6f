package runner

import (
	"strings"
	"testing"
)

// TestLogWriterLongLineKeepsSecretsWhole: a line too long to hold is cut,
// but a secret that straddles the cut is still redacted, whichever way
// the writes fall.
func TestLogWriterLongLineKeepsSecretsWhole(t *testing.T) {
	const secret = "CANARY-0123456789abcdef"
	for _, at := range []int{maxLogLine - 5, maxLogLine - 1, maxLogLine, maxLogLine + 3} {
		var out strings.Builder
		lw := newLogWriter(&out, newRedactor([]string{secret}))
		line := strings.Repeat("x", at) + secret + strings.Repeat("y", 100) + "\n"
		// Written in chunks whose boundaries fall inside the secret.
		for i := 0; i < len(line); i += 7 {
			_, _ = lw.stdout.Write([]byte(line[i:min(i+7, len(line))]))
		}
		lw.flush()
		got := out.String()
		if strings.Contains(got, "CANARY") || !strings.Contains(got, "[redacted]") {
			t.Errorf("secret at %d: the log shows it or lost it (%d bytes)", at, len(got))
		}
		if want := at + len("[redacted]") + 101; len(got) != want {
			t.Errorf("secret at %d: %d bytes out, want %d", at, len(got), want)
		}
	}
}
