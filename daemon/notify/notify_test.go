package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// hookRequest is one request a test receiver got.
type hookRequest struct {
	header http.Header
	body   []byte
}

// hookReceiver is a webhook endpoint answering each request with the
// status reply returns for its 1-based number.
type hookReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []hookRequest
	reply func(n int) int
}

func newHookReceiver(t *testing.T, reply func(n int) int) *hookReceiver {
	t.Helper()
	h := &hookReceiver{reply: reply}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, hookRequest{header: r.Header.Clone(), body: body})
		n := len(h.got)
		h.mu.Unlock()
		w.WriteHeader(h.reply(n))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

func always(code int) func(int) int { return func(int) int { return code } }

// lockedBuffer is a log destination safe for the sender goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startNotifier starts a notifier with fast retries logging to the
// returned buffer.
func startNotifier(t *testing.T, opts Options) (*Webhook, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.backoffBase = time.Millisecond
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second // a busy machine's request is no failed one
	}
	n := NewWebhook(opts)
	t.Cleanup(func() { closeNotifier(t, n, time.Second) })
	return n, logs
}

// drain is how long a test's Close may wait for the queued events to be
// delivered: long, since it only bounds a wait that ends with the last
// delivery, which a busy machine may delay by seconds.
const drain = time.Minute

// closeNotifier closes n within d and returns Close's error.
func closeNotifier(t *testing.T, n *Webhook, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return n.Close(ctx)
}

func driftEventFor(stack string) Event {
	return Event{Kind: DriftDetected, Stack: stack, Time: time.Unix(1700000000, 0).UTC(), Update: stack + "-7",
		Message: "1 resource(s) of stack " + stack + " changed outside Pulumi",
		Drift: &spec.DriftStatus{State: spec.DriftDrifted, Resources: []spec.DriftedResource{{
			URN:  "urn:pulumi:dev::proj::stackdtest:index:File::note",
			Type: "stackdtest:index:File", Op: "update", Properties: []string{"content"},
		}}}}
}

func TestWebhookNotifierDeliversSignedEvents(t *testing.T) {
	const secret = "s3cret"
	h := newHookReceiver(t, always(http.StatusNoContent))
	n, logs := startNotifier(t, Options{URLs: []string{h.srv.URL + "/hook"}, Secret: secret})
	kinds := []string{DriftDetected, DriftResolved, UpdateFailed, StackStalled, StackRecovered}
	for _, k := range kinds {
		e := driftEventFor("app")
		e.Kind = k
		n.Notify(e)
	}
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatalf("close: %v\n%s", err, logs)
	}
	got := h.requests()
	if len(got) != len(kinds) {
		t.Fatalf("got %d requests, want %d\n%s", len(got), len(kinds), logs)
	}
	for i, r := range got {
		if sig := r.header.Get(SignatureHeader); sig != Sign(secret, r.body) || !strings.HasPrefix(sig, "sha256=") {
			t.Errorf("request %d: signature %q does not match its body", i, sig)
		}
		if ev := r.header.Get(EventHeader); ev != kinds[i] {
			t.Errorf("request %d: %s = %q, want %q", i, EventHeader, ev, kinds[i])
		}
		var p struct {
			Source string `json:"source"`
			Event
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("request %d: %v: %s", i, err, r.body)
		}
		if p.Source != "stackd" || p.Kind != kinds[i] || p.Stack != "app" || p.Update != "app-7" ||
			p.Drift == nil || p.Drift.Resources[0].Properties[0] != "content" {
			t.Errorf("request %d: payload %s", i, r.body)
		}
	}
}

func TestWebhookNotifierUnsignedWithoutSecret(t *testing.T) {
	h := newHookReceiver(t, always(http.StatusOK))
	n, _ := startNotifier(t, Options{URLs: []string{h.srv.URL}})
	n.Notify(driftEventFor("app"))
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatal(err)
	}
	got := h.requests()
	if len(got) != 1 || got[0].header.Get(SignatureHeader) != "" || got[0].header.Get(EventHeader) != DriftDetected {
		t.Fatalf("requests: %+v", got)
	}
}

func TestWebhookNotifierSlackPayload(t *testing.T) {
	h := newHookReceiver(t, always(http.StatusOK))
	n, logs := startNotifier(t, Options{SlackURLs: []string{h.srv.URL + "/services/T0/B0/x"}, Secret: "s"})
	n.Notify(driftEventFor("app"))
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatalf("close: %v\n%s", err, logs)
	}
	got := h.requests()
	if len(got) != 1 {
		t.Fatalf("got %d requests, want 1", len(got))
	}
	var p map[string]any
	if err := json.Unmarshal(got[0].body, &p); err != nil {
		t.Fatal(err)
	}
	text, _ := p["text"].(string)
	if len(p) != 1 || !strings.Contains(text, "*app*") {
		t.Fatalf("payload %s: want only a text naming the stack", got[0].body)
	}
	want := ":warning: stackd: drift detected on stack *app*: 1 resource(s) changed outside Pulumi " +
		"(update stackdtest:index:File note: content) (update app-7)"
	if text != want {
		t.Errorf("text\n%s\nwant\n%s", text, want)
	}
	if got[0].header.Get(SignatureHeader) != "" {
		t.Error("a chat webhook got a signature")
	}
}

func TestNotifierSlackText(t *testing.T) {
	many := driftEventFor("web")
	many.Update = ""
	r := many.Drift.Resources[0]
	many.Drift.Resources = []spec.DriftedResource{r, {URN: "urn:pulumi:dev::proj::a:b:Parent$aws:s3:Bucket::logs", Op: "delete"}, r, r, r}
	tests := []struct {
		e    Event
		want string
	}{
		{many, ":warning: stackd: drift detected on stack *web*: 5 resource(s) changed outside Pulumi (update " +
			"stackdtest:index:File note: content; delete aws:s3:Bucket logs; update stackdtest:index:File note: content; and 2 more)"},
		{Event{Kind: UpdateFailed, Stack: "db", Update: "db-3", Message: "exit <1> & more"},
			":x: stackd: update failed on stack *db*: exit &lt;1&gt; &amp; more (update db-3)"},
		{Event{Kind: StackRecovered, Stack: "db"}, ":white_check_mark: stackd: stack recovered on stack *db*"},
		{Event{Kind: "something_new", Stack: "db", Message: "m"}, ":information_source: stackd: something new on stack *db*: m"},
	}
	for _, tt := range tests {
		if got := slackText(tt.e); got != tt.want {
			t.Errorf("slackText(%s)\n got %s\nwant %s", tt.e.Kind, got, tt.want)
		}
	}
}

func TestWebhookNotifierRetriesServerErrors(t *testing.T) {
	h := newHookReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	n, logs := startNotifier(t, Options{URLs: []string{h.srv.URL}, Retries: 3})
	n.Notify(driftEventFor("app"))
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatal(err)
	}
	if got := len(h.requests()); got != 3 {
		t.Fatalf("%d attempts, want 3 (two 500s, then 200)", got)
	}
	if strings.Contains(logs.String(), "not delivered") {
		t.Errorf("delivered event logged as lost:\n%s", logs)
	}
}

func TestWebhookNotifierGivesUpAfterRetries(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusRequestTimeout} {
		h := newHookReceiver(t, always(code))
		n, logs := startNotifier(t, Options{URLs: []string{h.srv.URL}, Retries: 2})
		n.Notify(driftEventFor("app"))
		if err := closeNotifier(t, n, drain); err != nil {
			t.Fatal(err)
		}
		if got := len(h.requests()); got != 3 {
			t.Errorf("status %d: %d attempts, want 3", code, got)
		}
		if !strings.Contains(logs.String(), "notification not delivered") {
			t.Errorf("status %d: no warning logged:\n%s", code, logs)
		}
	}
}

func TestWebhookNotifierNoRetryOnClientError(t *testing.T) {
	h := newHookReceiver(t, always(http.StatusBadRequest))
	n, logs := startNotifier(t, Options{URLs: []string{h.srv.URL}, Retries: 3})
	n.Notify(driftEventFor("app"))
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatal(err)
	}
	if got := len(h.requests()); got != 1 {
		t.Fatalf("%d attempts, want 1", got)
	}
	if !strings.Contains(logs.String(), "status 400") {
		t.Errorf("warning does not give the status:\n%s", logs)
	}
}

func TestWebhookNotifierNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	var hits sync.WaitGroup
	hits.Add(1)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(hits.Done)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	n, _ := startNotifier(t, Options{URLs: []string{srv.URL}, QueueSize: 10, Timeout: time.Minute})

	n.Notify(Event{Kind: UpdateFailed, Stack: "s0"})
	hits.Wait() // the sender now hangs on the first event, until the test ends
	// Were Notify to wait for the sender, it would never return: that it
	// does, however slowly, is the proof (its speed is BenchmarkNotify's).
	returns(t, "1000 Notify calls while the sender hangs", func() {
		for i := 1; i < 1000; i++ {
			n.Notify(Event{Kind: UpdateFailed, Stack: "s"})
		}
	})
	if got := n.Dropped(); got != 989 {
		t.Errorf("dropped %d events, want 989 (999 queued into 10 places)", got)
	}
	n.mu.Lock()
	queued := len(n.queue)
	n.mu.Unlock()
	if queued != 10 {
		t.Errorf("%d events queued, want 10", queued)
	}

	// The sender hangs until the test ends: a Close that waited for it
	// past its deadline would never return.
	var err error
	returns(t, "Close past its deadline", func() { err = closeNotifier(t, n, 100*time.Millisecond) })
	if err == nil {
		t.Error("Close reported nothing lost")
	}
	n.Notify(Event{Kind: UpdateFailed, Stack: "late"}) // after Close: dropped, no panic
}

func TestWebhookNotifierDropsOldest(t *testing.T) {
	release := make(chan struct{})
	h := newHookReceiver(t, func(n int) int {
		if n == 1 {
			<-release
		}
		return http.StatusOK
	})
	n, logs := startNotifier(t, Options{URLs: []string{h.srv.URL}, QueueSize: 2})
	n.Notify(Event{Kind: UpdateFailed, Stack: "first"})
	waitFor(t, func() bool { return len(h.requests()) == 1 })
	for _, s := range []string{"a", "b", "c", "d"} {
		n.Notify(Event{Kind: UpdateFailed, Stack: s})
	}
	close(release)
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatal(err)
	}
	var stacks []string
	for _, r := range h.requests() {
		var e Event
		if err := json.Unmarshal(r.body, &e); err != nil {
			t.Fatal(err)
		}
		stacks = append(stacks, e.Stack)
	}
	if strings.Join(stacks, ",") != "first,c,d" {
		t.Errorf("delivered %v, want first,c,d", stacks)
	}
	if !strings.Contains(logs.String(), "dropped=2") {
		t.Errorf("drops not logged:\n%s", logs)
	}
}

func TestWebhookNotifierLogsNoURLSecrets(t *testing.T) {
	h := newHookReceiver(t, always(http.StatusInternalServerError))
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connection refused: the client's error quotes the URL
	urls := []string{
		h.srv.URL + "/hook?token=SECRET",
		strings.Replace(h.srv.URL, "://", "://user:SECRET@", 1) + "/x",
		gone.URL + "/hook?token=SECRET",
	}
	slack := []string{h.srv.URL + "/services/T0/B0/SECRET", "http://%zz/SECRET", "ftp://SECRET"}
	n, logs := startNotifier(t, Options{URLs: urls, SlackURLs: slack, Retries: 1})
	n.Notify(driftEventFor("app"))
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Count(out, "notification not delivered") != 4 {
		t.Errorf("want 4 warnings, one per valid URL:\n%s", out)
	}
	if strings.Contains(out, "SECRET") || strings.Contains(out, "/hook") || strings.Contains(out, "/services") {
		t.Errorf("log shows more of a URL than scheme and host:\n%s", out)
	}
	if !strings.Contains(out, "webhook="+h.srv.URL) {
		t.Errorf("log does not name the webhook's host:\n%s", out)
	}
}

func TestNotifierCheckWebhookURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/x?token=SECRET": true,
		"http://127.0.0.1:8080/":                   true,
		"ftp://host/SECRET":                        false,
		"/relative/SECRET":                         false,
		"http://%zz/SECRET":                        false,
		"https:///SECRET":                          false,
	} {
		err := CheckWebhookURL(raw)
		if (err == nil) != ok {
			t.Errorf("CheckWebhookURL(%q) = %v", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("CheckWebhookURL(%q) quotes the URL: %v", raw, err)
		}
	}
}

func TestNotifierCopiesDrift(t *testing.T) {
	release := make(chan struct{})
	h := newHookReceiver(t, func(int) int { <-release; return http.StatusOK })
	n, _ := startNotifier(t, Options{URLs: []string{h.srv.URL}})
	e := driftEventFor("app")
	n.Notify(Event{Kind: UpdateFailed, Stack: "busy"})
	n.Notify(e)
	e.Drift.Resources[0].Properties[0] = "changed" // the daemon's copy moves on
	close(release)
	if err := closeNotifier(t, n, drain); err != nil {
		t.Fatal(err)
	}
	got := h.requests()
	if len(got) != 2 || !strings.Contains(string(got[1].body), `"properties":["content"]`) {
		t.Fatalf("requests: %d, last %s", len(got), got[len(got)-1].body)
	}
}

// returns runs f, which must return whatever the sender does, and fails
// the test if it has not after a minute: f is blocked (the bound only
// ends a failed test; it measures nothing).
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: blocked", what)
	}
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in time")
}

// BenchmarkNotify measures Notify while the sender hangs on a request
// and the queue is full: the daemon calls it holding its lock.
func BenchmarkNotify(b *testing.B) {
	release := make(chan struct{})
	hit := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hit <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(srv.Close)
	b.Cleanup(func() { close(release) })
	n := NewWebhook(Options{URLs: []string{srv.URL}, QueueSize: 10, Timeout: time.Minute,
		Logger: slog.New(slog.DiscardHandler)})
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = n.Close(ctx)
	})
	n.Notify(Event{Kind: UpdateFailed, Stack: "s0"})
	<-hit
	e := Event{Kind: UpdateFailed, Stack: "s"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n.Notify(e)
	}
}
