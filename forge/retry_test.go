package forge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, 2 * time.Second
	for _, c := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{0, 0, 100 * time.Millisecond},
		{0, 0.999999, 149999 * time.Microsecond},
		{1, 0, 200 * time.Millisecond},
		{1, 0.5, 250 * time.Millisecond},
		{3, 0, 800 * time.Millisecond},
		{4, 0, 1600 * time.Millisecond},
		{4, 0.5, 2 * time.Second}, // 1.6s + 0.4s
		{4, 0.9, 2 * time.Second}, // capped
		{5, 0, 2 * time.Second},
		{62, 0, 2 * time.Second}, // no overflow
		{1000, 0.5, 2 * time.Second},
	} {
		got := backoff(c.attempt, lo, hi, c.jitter)
		if diff := got - c.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("backoff(%d, jitter %v) = %v, want %v", c.attempt, c.jitter, got, c.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{" 12 ", 12 * time.Second, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999", 24 * time.Hour, true},
		{"Fri, 01 May 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Friday, 01-May-26 12:01:00 GMT", time.Minute, true},
		{"Fri, 01 May 2026 11:00:00 GMT", 0, true}, // past
	} {
		got, ok := parseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestRetryPolicyWait(t *testing.T) {
	p := retryPolicy{max: 5, minWait: time.Second, maxWait: 30 * time.Second}
	now := time.Now()
	answer := func(retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: 429, Header: h}
	}
	for _, c := range []struct {
		name    string
		attempt int
		resp    *http.Response
		want    time.Duration
	}{
		{"transport error", 2, nil, 4 * time.Second},
		{"no header", 0, answer(""), time.Second},
		{"retry-after 0", 3, answer("0"), 0},
		{"retry-after 5", 0, answer("5"), 5 * time.Second},
		{"retry-after capped", 0, answer("3600"), 30 * time.Second},
		{"retry-after garbage", 1, answer("later"), 2 * time.Second},
	} {
		if got := p.wait(c.attempt, c.resp, now, 0); got != c.want {
			t.Errorf("%s: wait = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		code       int
		retryAfter string
		want       bool
	}{
		{200, "", false},
		{201, "", false},
		{400, "", false},
		{401, "", false},
		{403, "", false},
		{403, "60", true}, // GitHub's secondary rate limit
		{404, "", false},
		{422, "", false},
		{429, "", true},
		{500, "", true},
		{501, "", false},
		{502, "", true},
		{503, "1", true},
		{504, "", true},
	} {
		h := http.Header{}
		if c.retryAfter != "" {
			h.Set("Retry-After", c.retryAfter)
		}
		if got := retryable(&http.Response{StatusCode: c.code, Header: h}); got != c.want {
			t.Errorf("retryable(%d, Retry-After %q) = %v", c.code, c.retryAfter, got)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 140, "short"},
		{strings.Repeat("a", 140), 140, strings.Repeat("a", 140)},
		{strings.Repeat("a", 141), 140, strings.Repeat("a", 139) + "…"},
		{"日本語テキスト", 4, "日本語…"},
	} {
		if got := truncate(c.in, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q", c.in, c.n, got)
		}
	}
}

func TestRedact(t *testing.T) {
	const secret = "s3cr3t/+tok"
	base := errors.New("GET https://h/x?access_token=s3cr3t%2F%2Btok: 401 s3cr3t/+tok")
	err := redact(fmt.Errorf("gitea: list: %w", base), secret)
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("secret left: %v", err)
	}
	if !errors.Is(err, base) {
		t.Error("redacted error does not unwrap")
	}
	plain := errors.New("nothing to hide")
	if redact(plain, secret) != plain || redact(plain, "") != plain || redact(nil, secret) != nil {
		t.Error("redact changed an error without the secret")
	}
}

func TestSplitRepo(t *testing.T) {
	if o, n, err := splitRepo("octo/app"); err != nil || o != "octo" || n != "app" {
		t.Errorf("splitRepo = %q, %q, %v", o, n, err)
	}
	for _, bad := range []string{"", "octo", "/app", "octo/", "a/b/c"} {
		if _, _, err := splitRepo(bad); err == nil {
			t.Errorf("splitRepo(%q) accepted", bad)
		}
	}
}

func TestGitHubAPI(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "",
		"https://github.com":           "",
		"https://GitHub.com":           "",
		"https://ghe.example.com":      "https://ghe.example.com/",
		"https://host:8443/prefix":     "https://host:8443/prefix/",
		"https://octocorp.ghe.com":     "https://api.octocorp.ghe.com/",
		"https://api.octocorp.ghe.com": "https://api.octocorp.ghe.com/",
	} {
		if got := githubAPI(in); got != want {
			t.Errorf("githubAPI(%q) = %q, want %q", in, got, want)
		}
	}
	g, err := newGitHub("https://ghe.example.com/prefix", "", http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.c.BaseURL.String(); got != "https://ghe.example.com/prefix/api/v3/" {
		t.Errorf("enterprise API = %s", got)
	}
}

// scripted answers a RoundTrip per call from its list; nil answers block
// until the attempt's context ends.
type scripted struct {
	answers []*http.Response
	bodies  []string
	calls   int
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	i := s.calls
	s.calls++
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		s.bodies = append(s.bodies, string(b))
	}
	if i >= len(s.answers) || s.answers[i] == nil {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return s.answers[i], nil
}

func answer(code int) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}
}

func transport(next http.RoundTripper) *retryTransport {
	return &retryTransport{
		next:    next,
		policy:  retryPolicy{max: 3, minWait: time.Millisecond, maxWait: 2 * time.Millisecond},
		timeout: 50 * time.Millisecond,
		log:     slog.New(slog.DiscardHandler),
	}
}

func TestRetryTransport(t *testing.T) {
	t.Run("attempt timeout then success, body sent again", func(t *testing.T) {
		s := &scripted{answers: []*http.Response{nil, answer(503), answer(201)}}
		req, _ := http.NewRequest("POST", "http://forge.example/x", strings.NewReader(`{"a":1}`))
		resp, err := transport(s).RoundTrip(req)
		if err != nil || resp.StatusCode != 201 || s.calls != 3 {
			t.Fatalf("resp %v, err %v, calls %d", resp, err, s.calls)
		}
		for _, b := range s.bodies {
			if b != `{"a":1}` {
				t.Errorf("bodies = %q", s.bodies)
			}
		}
	})
	t.Run("gives up after max retries with the last answer", func(t *testing.T) {
		s := &scripted{answers: []*http.Response{answer(502), answer(502), answer(502), answer(502), answer(200)}}
		req, _ := http.NewRequest("GET", "http://forge.example/x", nil)
		resp, err := transport(s).RoundTrip(req)
		if err != nil || resp.StatusCode != 502 || s.calls != 4 {
			t.Errorf("resp %v, err %v, calls %d", resp, err, s.calls)
		}
	})
	t.Run("no GetBody, no retry", func(t *testing.T) {
		s := &scripted{answers: []*http.Response{answer(503), answer(200)}}
		req, _ := http.NewRequest("POST", "http://forge.example/x", io.NopCloser(strings.NewReader("x")))
		resp, err := transport(s).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || s.calls != 1 {
			t.Errorf("resp %v, err %v, calls %d", resp, err, s.calls)
		}
	})
	t.Run("context ends during the wait", func(t *testing.T) {
		// The wait is an hour: a RoundTrip that did not end with its
		// context would not return within the test.
		s := &scripted{answers: []*http.Response{answer(429)}}
		s.answers[0].Header.Set("Retry-After", "3600")
		tr := transport(s)
		tr.policy.maxWait = time.Hour
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://forge.example/x", nil)
		done := make(chan error, 1)
		go func() { _, err := tr.RoundTrip(req); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatal("RoundTrip went on waiting after its context ended")
		}
		if !errors.Is(err, context.DeadlineExceeded) || s.calls != 1 {
			t.Errorf("err %v, calls %d", err, s.calls)
		}
	})
}
