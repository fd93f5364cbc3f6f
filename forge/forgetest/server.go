// Package forgetest fakes the REST APIs of GitHub (Enterprise Server),
// GitLab and Gitea on loopback, for tests of package forge and of the
// packages above it.
//
// The fake is strict: every request is checked against the forge's
// documented method and path, query parameters, headers (auth, and on
// GitHub Accept, X-GitHub-Api-Version and User-Agent) and JSON body
// (fields, enums, lengths); anything undocumented fails the test through
// t.Errorf and is answered as the forge would refuse it. Its state (the
// files of pull requests, the statuses and comments set) is read back
// with Statuses and Comments; a test changes a pull request's state (a
// push, a closing, a merge) with SetPullRequest, without a webhook.
package forgetest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/review"
)

// Comment is a comment on a pull request (a note on a merge request).
type Comment struct {
	ID   int64
	Body string
	// Edits counts the times the body was replaced.
	Edits int
}

// Request is an API request as the fake received it.
type Request struct {
	Method string
	// Path is the escaped path, API prefix included; Query the raw query.
	Path   string
	Query  string
	Header http.Header
	Body   string
	// Status is the code answered.
	Status int
}

// Server is a fake forge. Its methods are safe for concurrent use.
type Server struct {
	t       testing.TB
	kind    review.Kind
	token   string
	dialect *dialect
	srv     *httptest.Server
	mux     *http.ServeMux

	mu        sync.Mutex
	files     map[prKey][]change
	authors   map[prKey]User
	pulls     map[prKey]PullRequest
	statuses  map[string][]status // by repo + "@" + sha
	comments  []*comment          // oldest first
	nextID    int64
	seq       int64 // orders creations and edits
	failN     int
	failCode  int
	badAuthOK bool
	requests  []Request
	changed   chan struct{}
}

type prKey struct {
	repo   string
	number int
}

// change is one changed file; from is set for a rename.
type change struct{ path, from string }

type status struct {
	review.Status
	raw string // the state as the forge spells it
}

type comment struct {
	Comment
	pr               prKey
	created, updated int64 // Server.seq at creation and last edit
}

// New starts a fake forge of kind that takes token (empty: anonymous
// reads only) and closes it when the test ends.
func New(t testing.TB, kind review.Kind, token string) *Server {
	t.Helper()
	d := dialects[kind]
	if d == nil {
		t.Fatalf("forgetest: unknown forge kind %q", kind)
	}
	s := &Server{
		t: t, kind: kind, token: token, dialect: d,
		mux:      http.NewServeMux(),
		files:    map[prKey][]change{},
		authors:  map[prKey]User{},
		pulls:    map[prKey]PullRequest{},
		statuses: map[string][]status{},
		nextID:   d.firstID,
		changed:  make(chan struct{}),
	}
	s.mux.Handle(d.prefix+"/", http.HandlerFunc(s.serveAPI))
	s.mux.HandleFunc("/", s.serveUnknown)
	s.srv = httptest.NewServer(s.mux)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the forge's web address, for forge.Config.BaseURL. The API is
// under it: /api/v3 (GitHub Enterprise Server), /api/v4 (GitLab) or
// /api/v1 (Gitea).
func (s *Server) URL() string { return s.srv.URL }

// Handle serves pattern (an http.ServeMux pattern other than "/" and the
// API prefix) on the same host, e.g. a git smart-HTTP handler at "/git/".
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// SetFiles sets the files pull request number of repo changes, as
// ChangedFiles will list them. An entry "old => new" is a rename.
func (s *Server) SetFiles(repo string, number int, files []string) {
	list := make([]change, 0, len(files))
	for _, f := range files {
		from, to, ok := strings.Cut(f, " => ")
		if !ok {
			from, to = "", f
		}
		list = append(list, change{path: to, from: from})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[prKey{repo, number}] = list
	s.notifyLocked()
}

// User is a forge user.
type User struct {
	ID       int64
	Username string
}

// SetAuthor makes u the author of pull request number of repo, as the
// API's pull request (GitLab: merge request) tells it; the API answers
// 404 for a pull request that neither SetAuthor nor SetPullRequest
// named.
func (s *Server) SetAuthor(repo string, number int, u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authors[prKey{repo, number}] = u
	s.notifyLocked()
}

// PullRequest is the state of a pull request (a merge request on
// GitLab) as the API's pull request tells it.
type PullRequest struct {
	// Head is its head commit's SHA; empty: the answer names none.
	Head string
	// Closed is set once it is closed; Merged once it is merged, which
	// closes it too.
	Closed, Merged bool
}

// SetPullRequest sets the state of pull request number of repo, as a
// user's push, closing or merge does, without sending a webhook. A pull
// request named by SetAuthor alone is open, with no head.
func (s *Server) SetPullRequest(repo string, number int, pr PullRequest) {
	if pr.Merged {
		pr.Closed = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[prKey{repo, number}] = pr
	s.notifyLocked()
}

// DeletePullRequest forgets pull request number of repo, its author
// too: the API answers 404 for it, as for a deleted one.
func (s *Server) DeletePullRequest(repo string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pulls, prKey{repo, number})
	delete(s.authors, prKey{repo, number})
	s.notifyLocked()
}

// pullOf returns what the fake knows of pr: its state, its author, and
// whether it knows pr at all.
func (s *Server) pullOf(pr prKey) (PullRequest, *User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, known := s.pulls[pr]
	u, hasAuthor := s.authors[pr]
	if !hasAuthor {
		return st, nil, known
	}
	return st, &u, true
}

// Statuses returns every status set on sha in repo, in order, with
// states in review's words (GitLab's "failed" is review.Failure; a
// state review lacks is kept as the forge spells it).
func (s *Server) Statuses(repo, sha string) []review.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []review.Status
	for _, st := range s.statuses[repo+"@"+sha] {
		out = append(out, st.Status)
	}
	return out
}

// Comments returns the comments of pull request number of repo, oldest
// first.
func (s *Server) Comments(repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.pr == (prKey{repo, number}) {
			out = append(out, c.Comment)
		}
	}
	return out
}

// AddComment adds a comment as another user would, and returns its ID.
func (s *Server) AddComment(repo string, number int, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addCommentLocked(prKey{repo, number}, body).ID
}

// DeleteComment deletes comment id, as a user could.
func (s *Server) DeleteComment(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.comments = slices.DeleteFunc(s.comments, func(c *comment) bool { return c.ID == id })
	s.notifyLocked()
}

// FailNext makes the next n API requests answer code, with Retry-After:
// 0 when code is 429 or 403 (GitHub's secondary rate limit). FailNext(0,
// 0) stops failing.
func (s *Server) FailNext(n int, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failN, s.failCode = n, code
}

// ExpectAuthFailures makes a wrong or missing credential an expected
// event: it is answered 401 without failing the test. A credential in
// the wrong header or scheme still fails it. The 401's message echoes
// the credential received, so that tests can check clients keep it out
// of their errors.
func (s *Server) ExpectAuthFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badAuthOK = true
}

// Requests returns every API request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// Changed returns a channel closed at the next request or change of
// state.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitFor returns when cond holds, or ctx's error when ctx ends first.
// It checks cond at each request or change of state, and at least every
// 100ms for conditions on state outside the fake. cond must not call
// WaitFor.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := s.Changed()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-tick.C:
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) addCommentLocked(pr prKey, body string) *comment {
	s.nextID++
	s.seq++
	c := &comment{Comment: Comment{ID: s.nextID, Body: body}, pr: pr, created: s.seq, updated: s.seq}
	s.comments = append(s.comments, c)
	s.notifyLocked()
	return c
}

// findCommentLocked returns comment id if it belongs to pr's repository
// (and, when number is nonzero, to that pull request).
func (s *Server) findCommentLocked(repo string, number int, id int64) *comment {
	for _, c := range s.comments {
		if c.ID == id && c.pr.repo == repo && (number == 0 || c.pr.number == number) {
			return c
		}
	}
	return nil
}

// problem fails the test for a request that breaks the forge's API.
func (s *Server) problem(r *http.Request, format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("forgetest(%s): %s %s: %s", s.kind, r.Method, r.URL.RequestURI(), fmt.Sprintf(format, args...))
}

func (s *Server) serveUnknown(w http.ResponseWriter, r *http.Request) {
	s.problem(r, "no such endpoint (API requests go under %s/)", s.dialect.prefix)
	s.dialect.fail(w, http.StatusNotFound, "Not Found")
}
