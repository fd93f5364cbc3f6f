package forge

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// retryPolicy decides whether and when an attempt is tried again.
type retryPolicy struct {
	max              int // retries after the first attempt
	minWait, maxWait time.Duration
}

// retryable tells whether an answer is worth sending again: 429, 5xx but
// 501 (which no retry mends), and 403 with Retry-After (GitHub's
// secondary rate limit).
func retryable(resp *http.Response) bool {
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return true
	case code >= 500 && code != http.StatusNotImplemented:
		return true
	case code == http.StatusForbidden:
		return resp.Header.Get("Retry-After") != ""
	}
	return false
}

// wait returns how long to wait before retry number attempt+1 (attempt
// counts from 0) after resp, which is nil after a transport error:
// Retry-After when the answer has one, capped at maxWait, otherwise the
// exponential backoff. jitter is in [0, 1).
func (p retryPolicy) wait(attempt int, resp *http.Response, now time.Time, jitter float64) time.Duration {
	if resp != nil {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			return min(d, p.maxWait)
		}
	}
	return backoff(attempt, p.minWait, p.maxWait, jitter)
}

// backoff is minWait doubled attempt times, plus up to half again as
// jitter, within [minWait, maxWait].
func backoff(attempt int, minWait, maxWait time.Duration, jitter float64) time.Duration {
	d := minWait
	for i := 0; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d += time.Duration(float64(d) / 2 * jitter)
	return max(minWait, min(d, maxWait))
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date. A date in the past means no wait; a malformed or negative
// value is ignored (ok false).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// retryTransport sends a request, and sends it again after answers that
// retryable accepts and after transport errors, as policy says, until the
// request's context ends. It re-sends bodies through req.GetBody (a
// request with a body and no GetBody is sent once).
type retryTransport struct {
	next    http.RoundTripper
	policy  retryPolicy
	timeout time.Duration // of each attempt
	log     *slog.Logger
	secret  string // masked in logged errors
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		r, err := t.request(req, attempt)
		if err != nil {
			return nil, err
		}
		resp, err := t.try(r)
		if !t.again(req, attempt, resp, err) {
			return resp, err
		}
		wait := t.policy.wait(attempt, resp, time.Now(), rand.Float64())
		t.logRetry(req, attempt, resp, err, wait)
		if resp != nil {
			drain(resp.Body)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// request returns what attempt sends: req itself first, then clones with
// a fresh body.
func (t *retryTransport) request(req *http.Request, attempt int) (*http.Request, error) {
	if attempt == 0 {
		return req, nil
	}
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// again tells whether the attempt's outcome calls for another one.
func (t *retryTransport) again(req *http.Request, attempt int, resp *http.Response, err error) bool {
	switch {
	case attempt >= t.policy.max || req.Context().Err() != nil:
		return false
	case req.Body != nil && req.Body != http.NoBody && req.GetBody == nil:
		return false
	case err != nil:
		return true
	}
	return retryable(resp)
}

// try sends one attempt under its own timeout, which ends when the
// answer's body is closed.
func (t *retryTransport) try(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(r.Context(), t.timeout)
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

func (t *retryTransport) logRetry(req *http.Request, attempt int, resp *http.Response, err error, wait time.Duration) {
	attrs := []any{
		"method", req.Method,
		"path", req.URL.EscapedPath(),
		"attempt", attempt + 1,
		"wait", wait,
	}
	if resp != nil {
		attrs = append(attrs, "status", resp.StatusCode)
	}
	if err != nil {
		attrs = append(attrs, "error", mask(err.Error(), t.secret))
	}
	t.log.InfoContext(req.Context(), "retrying forge request", attrs...)
}

// sleep waits d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// drain reads a little of an answer not used, so that its connection can
// serve again, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// cancelBody ends an attempt's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
