package forgetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/review"
)

// recordingTB keeps the errors a Server reports instead of failing.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

const tok = "t0ken"

var goodGitHub = map[string]string{
	"Authorization":        "Bearer " + tok,
	"Accept":               "application/vnd.github.v3+json",
	"X-GitHub-Api-Version": "2022-11-28",
	"User-Agent":           "test",
	"Content-Type":         "application/json",
}

// send makes one request to s and returns its status code.
func send(t *testing.T, s *Server, method, path, body string, headers map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for key, val := range h {
		out[key] = val
	}
	if v == "" {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// TestChecks sends requests that break each forge's API and expects each
// to be reported (answered as the forge would: an unknown query parameter
// is ignored, a bad body refused); the good ones must pass unreported.
func TestChecks(t *testing.T) {
	gitlabAuth := map[string]string{"PRIVATE-TOKEN": tok, "Content-Type": "application/json"}
	giteaAuth := map[string]string{"Authorization": "token " + tok, "Content-Type": "application/json"}
	for _, c := range []struct {
		name    string
		kind    review.Kind
		method  string
		path    string
		body    string
		headers map[string]string
		bad     bool
	}{
		{"github good status", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending","context":"c"}`, goodGitHub, false},
		{"github good files", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/files?per_page=100&page=2", "", goodGitHub, false},
		{"github token scheme", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/files", "", with(goodGitHub, "Authorization", "token "+tok), false},
		{"github no api version", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/files", "", with(goodGitHub, "X-GitHub-Api-Version", ""), true},
		{"github wrong accept", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/files", "", with(goodGitHub, "Accept", "application/json"), true},
		{"github basic auth", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/files", "", with(goodGitHub, "Authorization", "Basic eDp5"), true},
		{"github wrong token", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/files", "", with(goodGitHub, "Authorization", "Bearer nope"), true},
		{"github unknown route", review.GitHub, "GET", "/api/v3/repos/o/r/pulls/1/commits", "", goodGitHub, true},
		{"github no prefix", review.GitHub, "GET", "/repos/o/r/pulls/1/files", "", goodGitHub, true},
		{"github wrong method", review.GitHub, "PUT", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending","context":"c"}`, goodGitHub, true},
		{"github bad state", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"failed","context":"c"}`, goodGitHub, true},
		{"github no context", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending"}`, goodGitHub, true},
		{"github unknown field", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending","context":"c","name":"x"}`, goodGitHub, true},
		{"github long description", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending","context":"c","description":"` + strings.Repeat("x", 141) + `"}`, goodGitHub, true},
		{"github relative target", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending","context":"c","target_url":"/p/1"}`, goodGitHub, true},
		{"github empty target", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/abc123", `{"state":"pending","context":"c","target_url":""}`, goodGitHub, true},
		{"github sha not hex", review.GitHub, "POST", "/api/v3/repos/o/r/statuses/main", `{"state":"pending","context":"c"}`, goodGitHub, true},
		{"github form body", review.GitHub, "POST", "/api/v3/repos/o/r/issues/1/comments", `{"body":"x"}`, with(goodGitHub, "Content-Type", "application/x-www-form-urlencoded"), true},
		{"github empty comment", review.GitHub, "POST", "/api/v3/repos/o/r/issues/1/comments", `{"body":""}`, goodGitHub, true},
		{"github huge comment", review.GitHub, "POST", "/api/v3/repos/o/r/issues/1/comments", `{"body":"` + strings.Repeat("x", 65537) + `"}`, goodGitHub, true},
		{"github bad page", review.GitHub, "GET", "/api/v3/repos/o/r/issues/1/comments?page=zero", "", goodGitHub, true},
		{"github unknown query", review.GitHub, "GET", "/api/v3/repos/o/r/issues/1/comments?limit=5", "", goodGitHub, true},
		{"github token in query", review.GitHub, "GET", "/api/v3/repos/o/r/issues/1/comments?since=" + tok, "", goodGitHub, true},
		{"gitlab good status", review.GitLab, "POST", "/api/v4/projects/g%2Fr/statuses/abc123", `{"state":"failed","name":"c"}`, gitlabAuth, false},
		{"gitlab good notes", review.GitLab, "GET", "/api/v4/projects/g%2Fs%2Fr/merge_requests/3/notes?sort=asc&order_by=created_at&per_page=100", "", gitlabAuth, false},
		{"gitlab path not encoded", review.GitLab, "GET", "/api/v4/projects/g/r/merge_requests/3/notes", "", gitlabAuth, true},
		{"gitlab bearer", review.GitLab, "GET", "/api/v4/projects/g%2Fr/merge_requests/3/notes", "", map[string]string{"Authorization": "Bearer " + tok}, true},
		{"gitlab github state", review.GitLab, "POST", "/api/v4/projects/g%2Fr/statuses/abc123", `{"state":"failure","name":"c"}`, gitlabAuth, true},
		{"gitlab no name", review.GitLab, "POST", "/api/v4/projects/g%2Fr/statuses/abc123", `{"state":"success"}`, gitlabAuth, true},
		{"gitlab bad sort", review.GitLab, "GET", "/api/v4/projects/g%2Fr/merge_requests/3/notes?sort=up", "", gitlabAuth, true},
		{"gitlab iid zero", review.GitLab, "GET", "/api/v4/projects/g%2Fr/merge_requests/0/diffs", "", gitlabAuth, true},
		{"gitea good status", review.Gitea, "POST", "/api/v1/repos/o/r/statuses/abc123", `{"state":"warning","context":"c","target_url":"","description":""}`, giteaAuth, false},
		{"gitea good comments", review.Gitea, "GET", "/api/v1/repos/o/r/issues/2/comments?page=1&limit=0", "", giteaAuth, false},
		{"gitea bearer", review.Gitea, "GET", "/api/v1/repos/o/r/issues/2/comments", "", map[string]string{"Authorization": "Bearer " + tok}, true},
		{"gitea per_page", review.Gitea, "GET", "/api/v1/repos/o/r/pulls/2/files?per_page=5", "", giteaAuth, true},
		{"gitea old edit path", review.Gitea, "PATCH", "/api/v1/repos/o/r/issues/2/comments/5", `{"body":"x"}`, giteaAuth, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			s := New(rec, c.kind, tok)
			code := send(t, s, c.method, c.path, c.body, c.headers)
			if got := rec.count() > 0; got != c.bad {
				t.Errorf("reported %v (answer %d), want %v: %q", got, code, c.bad, rec.errs)
			}
			if !c.bad && code >= 400 {
				t.Errorf("answered %d to a good request", code)
			}
		})
	}
}

func TestFailNextAndRequests(t *testing.T) {
	s := New(t, review.GitHub, tok)
	s.FailNext(2, http.StatusTooManyRequests)
	path := "/api/v3/repos/o/r/pulls/1/files"
	codes := []int{
		send(t, s, "GET", path, "", goodGitHub),
		send(t, s, "GET", path, "", goodGitHub),
		send(t, s, "GET", path, "", goodGitHub),
	}
	if codes[0] != 429 || codes[1] != 429 || codes[2] != 200 {
		t.Errorf("codes = %v", codes)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[2].Status != 200 || reqs[0].Header.Get("Authorization") != "Bearer "+tok {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestExtraHandler(t *testing.T) {
	s := New(t, review.Gitea, tok)
	s.Handle("/git/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	if code := send(t, s, "GET", "/git/o/r.git/info/refs", "", nil); code != http.StatusTeapot {
		t.Errorf("extra handler answered %d", code)
	}
	if len(s.Requests()) != 0 {
		t.Error("non-API request recorded")
	}
}

func TestWaitFor(t *testing.T) {
	s := New(t, review.GitHub, tok)
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.AddComment("o/r", 1, "hello")
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failed test only
	defer cancel()
	if err := s.WaitFor(ctx, func() bool { return len(s.Comments("o/r", 1)) == 1 }); err != nil {
		t.Fatal(err)
	}
	// A condition on state outside the fake is checked too.
	var outside atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { outside.Store(true) })
	if err := s.WaitFor(ctx, outside.Load); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel2()
	if err := s.WaitFor(short, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}
