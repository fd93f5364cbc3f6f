package forge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/forge"
	"github.com/stackd/stackd/forge/forgetest"
)

const (
	token  = "tok-0123456789abcdef"
	sha    = "abc123456789"
	number = 7
	marker = "<!-- stackd:preview -->"
)

// forgeCase is one forge under test, with a repository path of its kind.
type forgeCase struct {
	kind review.Kind
	repo string
}

var cases = []forgeCase{
	{review.GitHub, "octo/app"},
	{review.GitLab, "group/sub/app"},
	{review.Gitea, "octo/app"},
}

// eachForge runs test once per forge, in parallel.
func eachForge(t *testing.T, test func(t *testing.T, fc forgeCase)) {
	for _, fc := range cases {
		t.Run(string(fc.kind), func(t *testing.T) {
			t.Parallel()
			test(t, fc)
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
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

// setup starts a fake forge taking token and a client of it sending
// clientToken, with short backoffs; it returns the client's log too.
func setup(t *testing.T, kind review.Kind, clientToken string) (*forgetest.Server, review.Forge, *lockedBuffer) {
	t.Helper()
	srv := forgetest.New(t, kind, token)
	logs := &lockedBuffer{}
	f, err := forge.New(
		forge.Config{Kind: kind, BaseURL: srv.URL(), Token: clientToken},
		forge.Options{
			Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			MinBackoff: 5 * time.Millisecond,
			MaxBackoff: 50 * time.Millisecond,
			Timeout:    30 * time.Second, // a request to the fake: a failed test only
		})
	if err != nil {
		t.Fatal(err)
	}
	return srv, f, logs
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// countRequests counts the API requests whose path ends with suffix.
func countRequests(srv *forgetest.Server, method, suffix string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

func TestChangedFilesPagesAndRenames(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		var files, want []string
		for i := range 230 {
			files = append(files, fmt.Sprintf("stacks/s%03d/Pulumi.yaml", i))
			want = append(want, files[i])
		}
		// A rename on the last page, whose new side was listed already.
		files = append(files, "stacks/old/Pulumi.yaml => stacks/s000/Pulumi.yaml", "docs/x.md")
		want = append(want, "stacks/old/Pulumi.yaml", "docs/x.md")
		srv.SetFiles(fc.repo, number, files)

		got, err := f.ChangedFiles(ctx(t), fc.repo, number)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("ChangedFiles: got %d paths %q..., want %d", len(got), got[max(0, len(got)-3):], len(want))
		}
		if pages := countRequests(srv, "GET", "/files") + countRequests(srv, "GET", "/diffs"); pages < 3 {
			t.Errorf("listed %d pages, want 3 or more", pages)
		}
	})
}

func TestChangedFilesEmpty(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		_, f, _ := setup(t, fc.kind, token)
		got, err := f.ChangedFiles(ctx(t), fc.repo, number)
		if err != nil || len(got) != 0 {
			t.Errorf("ChangedFiles of no files = %q, %v", got, err)
		}
	})
}

func TestSetStatus(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		long := strings.Repeat("é", 200)
		pending := review.Status{Context: "stackd/dev", State: review.Pending, Description: long}
		success := review.Status{Context: "stackd/dev", State: review.Success, Description: "no changes", TargetURL: "https://stackd.example/p/1"}
		for _, st := range []review.Status{pending, success} {
			if err := f.SetStatus(ctx(t), fc.repo, sha, st); err != nil {
				t.Fatal(err)
			}
		}
		got := srv.Statuses(fc.repo, sha)
		if len(got) != 2 || got[0].State != review.Pending || got[1].State != review.Success {
			t.Fatalf("statuses = %+v, want pending then success", got)
		}
		if n := utf8.RuneCountInString(got[0].Description); n != 140 || !strings.HasSuffix(got[0].Description, "…") {
			t.Errorf("description of %d characters %q, want 140 ending in …", n, got[0].Description)
		}
		if got[1] != success {
			t.Errorf("status = %+v, want %+v", got[1], success)
		}
		first := srv.Requests()[0]
		if fc.kind != review.Gitea && strings.Contains(first.Body, "target_url") {
			t.Errorf("empty target_url sent: %s", first.Body)
		}
	})
}

// TestSetStatusError: the final state of a status whose preview will
// not finish is each forge's word for it (GitLab's canceled).
func TestSetStatusError(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		st := review.Status{Context: "stackd/prod", State: review.Error, Description: "Superseded by 0123456789ab"}
		if err := f.SetStatus(ctx(t), fc.repo, sha, st); err != nil {
			t.Fatal(err)
		}
		if got := srv.Statuses(fc.repo, sha); len(got) != 1 || got[0] != st {
			t.Errorf("statuses = %+v, want %+v", got, st)
		}
		want := map[review.Kind]string{review.GitHub: `"state":"error"`, review.GitLab: `"state":"canceled"`, review.Gitea: `"state":"error"`}[fc.kind]
		if body := srv.Requests()[0].Body; !strings.Contains(body, want) {
			t.Errorf("%s body %s, want %s", fc.kind, body, want)
		}
	})
}

func TestSetStatusFailure(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		st := review.Status{Context: "stackd/prod", State: review.Failure, Description: "preview failed"}
		if err := f.SetStatus(ctx(t), fc.repo, sha, st); err != nil {
			t.Fatal(err)
		}
		if got := srv.Statuses(fc.repo, sha); len(got) != 1 || got[0] != st {
			t.Errorf("statuses = %+v, want %+v", got, st)
		}
		if fc.kind == review.GitLab && !strings.Contains(srv.Requests()[0].Body, `"state":"failed"`) {
			t.Errorf("gitlab body %s, want state failed", srv.Requests()[0].Body)
		}
	})
}

// GitLab refuses a pending status on a pending one; that is no error.
func TestGitLabSamePendingTwice(t *testing.T) {
	srv, f, _ := setup(t, review.GitLab, token)
	st := review.Status{Context: "stackd/dev", State: review.Pending}
	for range 2 {
		if err := f.SetStatus(ctx(t), "group/app", sha, st); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Statuses("group/app", sha); len(got) != 1 {
		t.Errorf("statuses = %+v, want one", got)
	}
}

func TestGitLabProjectPathEncoded(t *testing.T) {
	srv, f, _ := setup(t, review.GitLab, token)
	if _, err := f.ChangedFiles(ctx(t), "group/sub/my.app", 1); err != nil {
		t.Fatal(err)
	}
	if p := srv.Requests()[0].Path; !strings.Contains(p, "/projects/group%2Fsub%2Fmy%2Eapp/") {
		t.Errorf("path %s does not name the project in one encoded segment", p)
	}
}

// TestGitLabPullRequestAuthor: the author of a merge request is read
// from the merge request's API, which webhooks triggered by other users
// do not name; a merge request the forge does not know is an error.
func TestGitLabPullRequestAuthor(t *testing.T) {
	srv, f, _ := setup(t, review.GitLab, token)
	finder, ok := f.(review.AuthorFinder)
	if !ok {
		t.Fatal("the GitLab client is no review.AuthorFinder")
	}
	srv.SetAuthor("group/sub/app", number, forgetest.User{ID: 51, Username: "alice"})
	if got, err := finder.PullRequestAuthor(ctx(t), "group/sub/app", number); err != nil || got != "alice" {
		t.Fatalf("author = %q, %v; want alice", got, err)
	}
	if p := srv.Requests()[0].Path; p != "/api/v4/projects/group%2Fsub%2Fapp/merge_requests/7" {
		t.Errorf("asked %s", p)
	}
	if got, err := finder.PullRequestAuthor(ctx(t), "group/sub/app", number+1); err == nil || got != "" {
		t.Errorf("unknown merge request: author %q, error %v", got, err)
	}
}

func TestUpsertComment(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		// Others' comments first, past the first page of a listing.
		for i := range 120 {
			srv.AddComment(fc.repo, number, fmt.Sprintf("comment %d", i))
		}
		id, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+"\nfirst", 0)
		if err != nil {
			t.Fatal(err)
		}
		id2, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+"\nsecond", id)
		if err != nil || id2 != id {
			t.Fatalf("edit by id = %d, %v; want %d", id2, err, id)
		}
		// A restarted daemon knows no id: the marker finds the comment.
		id3, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+"\nthird", 0)
		if err != nil || id3 != id {
			t.Fatalf("edit by marker = %d, %v; want %d", id3, err, id)
		}
		ours := commentsWith(srv.Comments(fc.repo, number), marker)
		if len(ours) != 1 || ours[0].ID != id || ours[0].Edits != 2 || !strings.HasSuffix(ours[0].Body, "third") {
			t.Errorf("comments = %+v, want one edited twice to third", ours)
		}
		// The same body again needs no edit.
		if _, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+"\nthird", 0); err != nil {
			t.Fatal(err)
		}
		if c := commentsWith(srv.Comments(fc.repo, number), marker); c[0].Edits != 2 {
			t.Errorf("identical body edited: %+v", c)
		}
	})
}

func TestUpsertCommentDeleted(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		id, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+" a", 0)
		if err != nil {
			t.Fatal(err)
		}
		// Gone, but another comment holds the marker: that one is edited.
		srv.DeleteComment(id)
		other := srv.AddComment(fc.repo, number, "old "+marker)
		got, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+" b", id)
		if err != nil || got != other {
			t.Fatalf("upsert of deleted id = %d, %v; want the marker's %d", got, err, other)
		}
		// Gone and no marker anywhere: a new comment.
		srv.DeleteComment(other)
		got, err = f.UpsertComment(ctx(t), fc.repo, number, marker, marker+" c", other)
		if err != nil || got == other || got == 0 {
			t.Fatalf("upsert of deleted id = %d, %v; want a new comment", got, err)
		}
		if c := srv.Comments(fc.repo, number); len(c) != 1 || c[0].ID != got || c[0].Body != marker+" c" {
			t.Errorf("comments = %+v", c)
		}
	})
}

func TestUpsertCommentEmptyMarker(t *testing.T) {
	_, f, _ := setup(t, review.GitHub, token)
	if _, err := f.UpsertComment(ctx(t), "octo/app", 1, "", "body", 0); err == nil {
		t.Error("empty marker accepted")
	}
}

func commentsWith(list []forgetest.Comment, marker string) []forgetest.Comment {
	return slices.DeleteFunc(list, func(c forgetest.Comment) bool { return !strings.Contains(c.Body, marker) })
}

func TestRetry(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, logs := setup(t, fc.kind, token)
		failures := []struct{ n, code int }{{2, 503}, {1, 429}, {1, 500}}
		if fc.kind == review.GitHub {
			failures = append(failures, struct{ n, code int }{1, 403}) // secondary rate limit
		}
		for i, fail := range failures {
			before := len(srv.Requests())
			srv.FailNext(fail.n, fail.code)
			st := review.Status{Context: fmt.Sprintf("stackd/s%d", i), State: review.Pending}
			if err := f.SetStatus(ctx(t), fc.repo, sha, st); err != nil {
				t.Fatalf("after %d × %d: %v", fail.n, fail.code, err)
			}
			if sent := len(srv.Requests()) - before; sent != fail.n+1 {
				t.Errorf("after %d × %d: sent %d requests, want %d", fail.n, fail.code, sent, fail.n+1)
			}
			if !strings.Contains(logs.String(), fmt.Sprintf("status=%d", fail.code)) {
				t.Errorf("no retry logged for %d:\n%s", fail.code, logs)
			}
		}
		if got := srv.Statuses(fc.repo, sha); len(got) != len(failures) {
			t.Errorf("statuses = %+v", got)
		}
		// Bodies are sent again too: the edit fails once, then lands.
		id, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+" 1", 0)
		if err != nil {
			t.Fatal(err)
		}
		srv.FailNext(1, 502)
		if _, err := f.UpsertComment(ctx(t), fc.repo, number, marker, marker+" 2", id); err != nil {
			t.Fatal(err)
		}
		if c := srv.Comments(fc.repo, number); len(c) != 1 || c[0].Body != marker+" 2" {
			t.Errorf("comments = %+v", c)
		}
		if strings.Contains(logs.String(), token) {
			t.Error("token in logs")
		}
	})
}

func TestRetryGivesUp(t *testing.T) {
	srv := forgetest.New(t, review.Gitea, token)
	f, err := forge.New(forge.Config{Kind: review.Gitea, BaseURL: srv.URL(), Token: token},
		forge.Options{MaxRetries: 2, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv.FailNext(10, 503)
	err = f.SetStatus(ctx(t), "octo/app", sha, review.Status{Context: "c", State: review.Pending})
	if err == nil || !strings.HasPrefix(err.Error(), "gitea: set status of "+sha+" on octo/app: ") {
		t.Errorf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("sent %d requests, want 3", n)
	}
}

// TestContextEndStopsRetries: the call's context ends during the wait
// before a retry, an hour: the call returns at once, with the context's
// error. (A call that waited would not return within the test.)
func TestContextEndStopsRetries(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv := forgetest.New(t, fc.kind, token)
		f, err := forge.New(forge.Config{Kind: fc.kind, BaseURL: srv.URL(), Token: token},
			forge.Options{MaxRetries: 1000, MinBackoff: time.Hour, MaxBackoff: time.Hour, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		srv.FailNext(1000, 503)
		c, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- f.SetStatus(c, fc.repo, sha, review.Status{Context: "c", State: review.Pending}) }()
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the call went on waiting for its retry after its context ended")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want deadline exceeded", err)
		}
		if n := len(srv.Requests()); n > 1 {
			t.Errorf("sent %d requests, want the first alone", n)
		}
		srv.FailNext(0, 0)
	})
}

func TestTokenNeverInErrors(t *testing.T) {
	const bad = "bad-s3cret-token-42"
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, logs := setup(t, fc.kind, bad)
		srv.ExpectAuthFailures() // and echoes the credential it got
		_, err1 := f.ChangedFiles(ctx(t), fc.repo, number)
		err2 := f.SetStatus(ctx(t), fc.repo, sha, review.Status{Context: "c", State: review.Success})
		_, err3 := f.UpsertComment(ctx(t), fc.repo, number, marker, marker, 1)
		for _, err := range []error{err1, err2, err3} {
			switch {
			case err == nil:
				t.Error("bad token accepted")
			case strings.Contains(err.Error(), bad):
				t.Errorf("token in error: %v", err)
			case !strings.HasPrefix(err.Error(), string(fc.kind)+": "):
				t.Errorf("error lacks the forge's context: %v", err)
			}
		}
		if n := len(srv.Requests()); n != 3 {
			t.Errorf("sent %d requests, want 3: a 401 is not retried", n)
		}
		if strings.Contains(logs.String(), bad) {
			t.Errorf("token in logs:\n%s", logs)
		}
	})
}

func TestAnonymous(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv := forgetest.New(t, fc.kind, "")
		srv.SetFiles(fc.repo, 1, []string{"a"})
		f, err := forge.New(forge.Config{Kind: fc.kind, BaseURL: srv.URL()}, forge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := f.ChangedFiles(ctx(t), fc.repo, 1); err != nil || len(got) != 1 {
			t.Errorf("anonymous read = %q, %v", got, err)
		}
		if err := f.SetStatus(ctx(t), fc.repo, sha, review.Status{Context: "c", State: review.Pending}); err == nil {
			t.Error("anonymous write succeeded")
		}
	})
}

func TestMalformedRepo(t *testing.T) {
	for _, kind := range []review.Kind{review.GitHub, review.Gitea} {
		srv := forgetest.New(t, kind, token)
		f, err := forge.New(forge.Config{Kind: kind, BaseURL: srv.URL(), Token: token}, forge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, repo := range []string{"noslash", "/name", "owner/", "a/b/c"} {
			if _, err := f.ChangedFiles(ctx(t), repo, 1); err == nil {
				t.Errorf("%s: repo %q accepted", kind, repo)
			}
		}
		if len(srv.Requests()) != 0 {
			t.Errorf("%s: malformed repos reached the forge", kind)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		srv.SetFiles(fc.repo, number, []string{"a", "b"})
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				st := review.Status{Context: fmt.Sprintf("stackd/s%d", i), State: review.Success}
				if err := f.SetStatus(ctx(t), fc.repo, sha, st); err != nil {
					t.Error(err)
				}
				if _, err := f.ChangedFiles(ctx(t), fc.repo, number); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		c, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := srv.WaitFor(c, func() bool { return len(srv.Statuses(fc.repo, sha)) == 8 }); err != nil {
			t.Error(err)
		}
	})
}

func TestMaxComment(t *testing.T) {
	want := map[review.Kind]int{review.GitHub: 65536, review.GitLab: 1000000, review.Gitea: 65536}
	for kind, n := range want {
		f, err := forge.New(forge.Config{Kind: kind, BaseURL: "https://forge.example"}, forge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if f.MaxComment() != n {
			t.Errorf("%s: MaxComment = %d, want %d", kind, f.MaxComment(), n)
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, c := range []forge.Config{
		{Kind: "bitbucket", BaseURL: "https://bitbucket.org"},
		{Kind: review.Gitea},
		{Kind: review.GitHub, BaseURL: "ftp://ghe.example"},
		{Kind: review.GitLab, BaseURL: "https://user:pw@gitlab.example"},
		{Kind: review.GitLab, BaseURL: "https://gitlab.example/?x=1"},
	} {
		if _, err := forge.New(c, forge.Options{}); err == nil {
			t.Errorf("New(%+v) accepted", c)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("password in error: %v", err)
		}
	}
}

// TestPullRequestState: each forge tells a pull request's state from its
// API's pull request (GitLab: merge request): open at its head commit,
// moved to a new head, closed, merged; one it does not know (404) is
// gone, which is no error.
func TestPullRequestState(t *testing.T) {
	paths := map[review.Kind]string{
		review.GitHub: "/api/v3/repos/octo/app/pulls/7",
		review.GitLab: "/api/v4/projects/group%2Fsub%2Fapp/merge_requests/7",
		review.Gitea:  "/api/v1/repos/octo/app/pulls/7",
	}
	const head, next = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, token)
		finder, ok := f.(review.StateFinder)
		if !ok {
			t.Fatalf("the %s client is no review.StateFinder", fc.kind)
		}
		steps := []struct {
			name string
			set  func()
			want review.PullRequestState
		}{
			{"open", func() { srv.SetPullRequest(fc.repo, number, forgetest.PullRequest{Head: head}) },
				review.PullRequestState{Open: true, HeadSHA: head}},
			{"pushed", func() { srv.SetPullRequest(fc.repo, number, forgetest.PullRequest{Head: next}) },
				review.PullRequestState{Open: true, HeadSHA: next}},
			{"closed", func() { srv.SetPullRequest(fc.repo, number, forgetest.PullRequest{Head: next, Closed: true}) },
				review.PullRequestState{HeadSHA: next}},
			{"merged", func() { srv.SetPullRequest(fc.repo, number, forgetest.PullRequest{Head: next, Merged: true}) },
				review.PullRequestState{Merged: true, HeadSHA: next}},
			{"deleted", func() { srv.DeletePullRequest(fc.repo, number) },
				review.PullRequestState{Gone: true}},
		}
		for _, st := range steps {
			st.set()
			got, err := finder.PullRequestState(ctx(t), fc.repo, number)
			if err != nil || got != st.want {
				t.Errorf("%s: state = %+v, %v; want %+v", st.name, got, err, st.want)
			}
		}
		reqs := srv.Requests()
		if len(reqs) != len(steps) {
			t.Fatalf("sent %d requests, want %d", len(reqs), len(steps))
		}
		for _, r := range reqs {
			if r.Method != "GET" || r.Path != paths[fc.kind] {
				t.Errorf("asked %s %s, want GET %s", r.Method, r.Path, paths[fc.kind])
			}
		}
	})
}

// TestPullRequestStateErrors: an answer other than 404 that is no pull
// request is an error, never a closing: a bad token (401, its error
// without the token) and a forge that keeps failing (5xx, retried).
func TestPullRequestStateErrors(t *testing.T) {
	const bad = "bad-s3cret-token-42"
	eachForge(t, func(t *testing.T, fc forgeCase) {
		srv, f, _ := setup(t, fc.kind, bad)
		srv.ExpectAuthFailures()
		srv.SetPullRequest(fc.repo, number, forgetest.PullRequest{Head: sha})
		st, err := f.(review.StateFinder).PullRequestState(ctx(t), fc.repo, number)
		switch {
		case err == nil || st != (review.PullRequestState{}):
			t.Errorf("bad token: state %+v, error %v; want an error alone", st, err)
		case strings.Contains(err.Error(), bad):
			t.Errorf("token in error: %v", err)
		case !strings.HasPrefix(err.Error(), string(fc.kind)+": get the state of "):
			t.Errorf("error lacks its context: %v", err)
		}

		srv2, f2, _ := setup(t, fc.kind, token)
		srv2.SetPullRequest(fc.repo, number, forgetest.PullRequest{Head: sha})
		srv2.FailNext(1000, 502)
		// The forge fails until the client retried: then the call ends.
		c, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			_ = srv2.WaitFor(c, func() bool { return countRequests(srv2, "GET", "/"+strconv.Itoa(number)) >= 2 })
			cancel()
		}()
		if st, err := f2.(review.StateFinder).PullRequestState(c, fc.repo, number); err == nil || st.Gone || st.Open {
			t.Errorf("failing forge: state %+v, error %v; want an error alone", st, err)
		}
		if n := countRequests(srv2, "GET", "/"+strconv.Itoa(number)); n < 2 {
			t.Errorf("sent %d requests to a failing forge, want retries", n)
		}
		srv2.FailNext(0, 0)
	})
}

// TestGitLabAuthorOnlyIsOpen: a merge request the fake knows by its
// author alone is open, with no head commit named (which the previews
// take as nothing to catch up with).
func TestGitLabAuthorOnlyIsOpen(t *testing.T) {
	srv, f, _ := setup(t, review.GitLab, token)
	srv.SetAuthor("group/sub/app", number, forgetest.User{ID: 51, Username: "alice"})
	st, err := f.(review.StateFinder).PullRequestState(ctx(t), "group/sub/app", number)
	if err != nil || st != (review.PullRequestState{Open: true}) {
		t.Errorf("state = %+v, %v; want open with no head", st, err)
	}
}
