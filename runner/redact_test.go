package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/model"
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

// TestLogWriterOmit: the lines that name the omitted text are dropped,
// however the writes fall; the others pass.
func TestLogWriterOmit(t *testing.T) {
	var out strings.Builder
	lw := newLogWriter(&out, newRedactor(nil))
	lw.omit = "/data/judged-plan.json"
	text := "Resources:\n    + 1 to create\n\nUpdate plan written to '/data/judged-plan.json'\n" +
		"Run `pulumi up --plan='/data/judged-plan.json'` to constrain the update\nend"
	for i := 0; i < len(text); i += 5 {
		_, _ = lw.stdout.Write([]byte(text[i:min(i+5, len(text))]))
	}
	lw.flush()
	if got, want := out.String(), "Resources:\n    + 1 to create\n\nend"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}

// TestSecretsTold: the runner tells Options.Secrets the shared
// passphrase and the secret daemon-wide environment at start, a stack's
// own passphrase when it is made, and the own passphrases found at the
// next start.
func TestSecretsTold(t *testing.T) {
	data := t.TempDir()
	var mu sync.Mutex
	told := map[string]bool{}
	opts := Options{Bin: fakePulumi(t, "env\n"), DataDir: data, Env: []string{"API_TOKEN=daemon-wide-tok", "REGION=plain-region"},
		Secrets: func(values ...string) {
			mu.Lock()
			defer mu.Unlock()
			for _, v := range values {
				told[v] = true
			}
		}}
	r, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := os.ReadFile(filepath.Join(data, "passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	if !told[strings.TrimSpace(string(shared))] || !told["daemon-wide-tok"] || told["plain-region"] {
		t.Fatalf("told %d values at start: the shared passphrase %v, the token %v, a plain value %v",
			len(told), told[strings.TrimSpace(string(shared))], told["daemon-wide-tok"], told["plain-region"])
	}
	if _, err := r.workspace(model.Workspace{Name: "s", Stack: "dev", ProjectDir: project(t)}); err != nil {
		t.Fatal(err)
	}
	own, _ := filepath.Glob(filepath.Join(data, "passphrases", "*"))
	if len(own) != 1 {
		t.Fatalf("own passphrases: %v", own)
	}
	pass, _ := os.ReadFile(own[0])
	if !told[strings.TrimSpace(string(pass))] {
		t.Error("the stack's own passphrase was not told")
	}
	clear(told)
	if _, err := New(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !told[strings.TrimSpace(string(pass))] {
		t.Error("the stack's own passphrase was not told at the next start")
	}
}
