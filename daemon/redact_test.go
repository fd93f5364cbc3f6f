package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// Secrets of TestOneStacksSecretsScrubbedFromAnother: distinctive, so
// that a leak anywhere is found by a plain search for "SENTINEL".
const (
	literalA = "lit-SENTINEL-5d1e"   // stack a's secret config
	refA     = "ref-SENTINEL-77c0"   // stack a's secretsRef, a Secret file
	envA     = "env-SENTINEL-2b4f"   // stack a's envRefs literal
	apiToken = "api-SENTINEL-c3b9"   // the daemon's own
	repoTok  = "glpat-SENTINEL-b0b0" // in stack b's projectRepo query
)

const twoStacksOneWithSecrets = `
stacks:
  - name: a
    stack: dev
    projectRepo: https://git.example/a.git
    branch: main
    secrets: {password: ` + literalA + `}
    secretsRef:
      db: {type: Secret, secret: {name: db, key: password}}
    envRefs:
      API_KEY: {type: Literal, literal: {value: ` + envA + `}}
  - name: b
    stack: dev
    projectRepo: https://git.example/b.git?private_token=` + repoTok + `
    branch: main
    config: {copied: ` + literalA + `}
`

// leakRunner runs stack "leaky" as a program that prints, fails with and
// outputs the secrets in leak: first a failure, then a success.
type leakRunner struct {
	*fakeRunner
	leaky string
	leak  string
	mu    sync.Mutex
	runs  int
}

func (r *leakRunner) Run(ctx context.Context, op model.Operation) (model.Result, error) {
	if op.Name != r.leaky {
		return r.fakeRunner.Run(ctx, op)
	}
	r.mu.Lock()
	r.runs++
	first := r.runs == 1
	r.mu.Unlock()
	fmt.Fprintf(op.Log, "the program prints %s\n", r.leak)
	if first {
		return model.Result{}, errors.New("the program failed: " + r.leak)
	}
	leak, _ := json.Marshal(r.leak)
	return model.Result{Outputs: map[string]json.RawMessage{"leak": leak, "nested": json.RawMessage(`{"k":[` + string(leak) + `]}`)}}, nil
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOneStacksSecretsScrubbedFromAnother: stack b's program prints,
// fails with and outputs stack a's secrets (literal, Secret reference,
// env literal), the daemon's API token and a URL with credentials, and
// its spec copies a's literal into a plain config value; none of them
// reaches the store, the API, the notifications or the daemon's log,
// where each shows as [secret].
func TestOneStacksSecretsScrubbedFromAnother(t *testing.T) {
	n := &recordingNotifier{}
	var logBuf syncBuffer
	leak := strings.Join([]string{literalA, refA, envA, apiToken,
		"https://user:pw-SENTINEL-1@host/x?password=pw-SENTINEL-2&ref=main"}, " ")
	var lr *leakRunner
	h := newHarness(t, twoStacksOneWithSecrets, func(o *Options) {
		lr = &leakRunner{fakeRunner: o.Runner.(*fakeRunner), leaky: "b", leak: leak}
		o.Runner, o.Notifier, o.MaxFailures = lr, n, 5
		o.Redactor = scrub.NewRedactor(apiToken)
		o.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	})
	writeSecretFile(t, filepath.Join(h.dir, "secrets"), "db", "password", refA)
	h.fetcher.set("https://git.example/a.git", sha1, nil)
	h.fetcher.set("https://git.example/b.git?private_token="+repoTok, sha1, nil)
	h.start()
	h.eventually("b succeeds after its failure", func() bool {
		l := h.last("b")
		return l != nil && l.State == model.UpdateSucceeded && h.ready("a")
	})
	if lr.runs < 2 {
		t.Fatalf("b ran %d times, want a failure and a success", lr.runs)
	}

	views, _ := json.Marshal(h.d.Stacks())
	cfgStatus, _ := json.Marshal(h.d.ConfigStatus())
	ups, _ := h.d.Updates("b", 0, 10)
	upsJSON, _ := json.Marshal(ups)
	log, _, _ := h.d.Log(ups[len(ups)-1].ID)
	n.mu.Lock()
	events, _ := json.Marshal(n.events)
	n.mu.Unlock()
	h.store.mu.Lock()
	stored, _ := json.Marshal([]any{h.store.stacks, h.store.updates, h.store.logs, h.store.revisions})
	h.store.mu.Unlock()
	for what, text := range map[string]string{"API views": string(views), "config status": string(cfgStatus),
		"API updates": string(upsJSON), "API log": string(log), "notifications": string(events),
		"store": string(stored), "daemon log": logBuf.String()} {
		if strings.Contains(text, "SENTINEL") {
			t.Errorf("%s show a secret: %s", what, text)
		}
	}

	b, _ := h.d.Stack("b")
	if got := string(b.Status.Outputs["leak"]); got != `"[secret] [secret] [secret] [secret] https://[secret]@host/x?password=[secret]\u0026ref=main"` {
		t.Errorf("output leak = %s", got)
	}
	if got := string(b.Status.Outputs["nested"]); !strings.Contains(got, `"[secret] [secret]`) {
		t.Errorf("output nested = %s", got)
	}
	if b.Tracking != "https://git.example/b.git?[redacted]@main" {
		t.Errorf("tracking = %q", b.Tracking)
	}
	failed := ups[len(ups)-1]
	if failed.State != model.UpdateFailed || !strings.Contains(failed.Message, "the program failed: [secret] [secret]") {
		t.Errorf("first update = %+v", failed)
	}
	for _, want := range []string{"the program prints [secret] [secret] [secret] [secret]", "error: the program failed: [secret]"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the failed update's log lacks %q: %s", want, log)
		}
	}
	if !strings.Contains(string(events), `the program failed: [secret]`) {
		t.Errorf("no notification tells of the failure: %s", events)
	}
}

// TestSecretLearnedLaterScrubsKnownStatus: a status recorded before a
// secret was known is clean once a config that holds the secret is
// applied, in the API and in the store, and its version changes so that
// clients that keep views ask for it again.
func TestSecretLearnedLaterScrubsKnownStatus(t *testing.T) {
	const value = "later-SENTINEL-9e9e"
	var lr *leakRunner
	h := newHarness(t, oneStack, func(o *Options) {
		lr = &leakRunner{fakeRunner: o.Runner.(*fakeRunner), leaky: "app", leak: value}
		lr.runs = 1 // succeed at once
		o.Runner = lr
	})
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })
	if v, _ := h.d.Stack("app"); !strings.Contains(string(v.Status.Outputs["leak"]), value) {
		t.Fatalf("the output is scrubbed before the value is known as a secret: %s", v.Status.Outputs["leak"])
	}
	before := h.d.StackVersions()[0].Version
	withSecret := oneStack + `
  - name: other
    stack: dev
    projectRepo: https://git.example/other.git
    branch: main
    secrets: {token: ` + value + `}
`
	if err := h.d.Apply(h.parse(withSecret)); err != nil {
		t.Fatal(err)
	}
	if got := h.d.StackVersions()[0]; got.Name != "app" || got.Version == before {
		t.Errorf("app's version stayed %d though its view changed", before)
	}
	v, _ := h.d.Stack("app")
	if got := string(v.Status.Outputs["leak"]); got != `"[secret]"` {
		t.Errorf("output = %s after the value became a known secret", got)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if got := string(h.store.stacks["app"].Status.Outputs["leak"]); got != `"[secret]"` {
		t.Errorf("stored output = %s", got)
	}
}

// writeSecretFile writes a Secret reference's file: <dir>/<name>/<key>.
func writeSecretFile(t *testing.T, dir, name, key, value string) {
	t.Helper()
	p := filepath.Join(dir, name, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLogAndNotifierScrubbed: what the daemon logs and tells is cleaned
// even when its caller did not clean it.
func TestLogAndNotifierScrubbed(t *testing.T) {
	n := &recordingNotifier{}
	var logBuf syncBuffer
	h := newHarness(t, oneStack, func(o *Options) {
		o.Notifier, o.Redactor = n, scrub.NewRedactor(apiToken)
		o.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	})
	h.d.opts.Notifier.Notify(notify.Event{Kind: notify.UpdateFailed, Message: "failed with " + apiToken,
		Drift: &spec.DriftStatus{Message: "check failed: " + apiToken}})
	h.d.log.Warn("cannot "+apiToken, "err", errors.New("token "+apiToken), "url", "https://h?token=t0k-SENTINEL")
	if got := n.events[0]; got.Message != "failed with [secret]" || got.Drift.Message != "check failed: [secret]" {
		t.Errorf("notified %+v", got)
	}
	if strings.Contains(logBuf.String(), "SENTINEL") {
		t.Errorf("the log shows a secret: %s", logBuf.String())
	}
}
