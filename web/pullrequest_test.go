package web

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/review"
)

// fakePreviews is a PreviewAPI that records the events it takes and
// answers accepted.
type fakePreviews struct {
	mu       sync.Mutex
	events   []review.Event
	accepted review.Accepted
	prs      []review.PullRequest
}

func (f *fakePreviews) PullRequest(ev review.Event) review.Accepted {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	res := f.accepted
	res.PullRequest = ev.Key()
	return res
}

func (f *fakePreviews) PullRequests() []review.PullRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.prs)
}

func (f *fakePreviews) taken() []review.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// fixture reads testdata/name and applies edits to its JSON: each key is
// a path of object keys split by "." and its value the new value (nil
// deletes the key).
func fixture(t *testing.T, name string, edits map[string]any) string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for path, v := range edits {
		keys := strings.Split(path, ".")
		m := doc
		for _, k := range keys[:len(keys)-1] {
			m = m[k].(map[string]any)
		}
		if v == nil {
			delete(m, keys[len(keys)-1])
		} else {
			m[keys[len(keys)-1]] = v
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// The events the fixtures describe.
var (
	githubEvent = review.Event{Forge: review.GitHub, Action: review.Opened, Repo: "acme/infra",
		URLs:   []string{"https://github.com/acme/infra.git", "git@github.com:acme/infra.git", "https://github.com/acme/infra", "git://github.com/acme/infra.git"},
		Number: 12, BaseBranch: "main", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", HeadBranch: "feature/assets",
		Author: "octocat", Title: "Add an assets bucket", WebURL: "https://github.com/acme/infra/pull/12"}
	giteaEvent = review.Event{Forge: review.Gitea, Action: review.Pushed, Repo: "acme/infra",
		URLs:   []string{"https://gitea.example/acme/infra.git", "git@gitea.example:acme/infra.git", "https://gitea.example/acme/infra"},
		Number: 7, BaseBranch: "main", HeadSHA: "1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e", HeadBranch: "queue-region", Fork: true,
		Author: "alice", Title: "Move the queue to eu-west-1", WebURL: "https://gitea.example/acme/infra/pulls/7"}
	gitlabEvent = review.Event{Forge: review.GitLab, Action: review.Pushed, Repo: "platform/team/infra",
		URLs: []string{"git@gitlab.example:platform/team/infra.git", "https://gitlab.example/platform/team/infra.git",
			"https://gitlab.example/platform/team/infra"},
		Number: 3, BaseBranch: "main", HeadSHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", HeadBranch: "db-size",
		Author: "root", Title: "Grow the database", WebURL: "https://gitlab.example/platform/team/infra/-/merge_requests/3"}
)

// with returns ev changed by f.
func with(ev review.Event, f func(*review.Event)) review.Event {
	ev.URLs = slices.Clone(ev.URLs)
	f(&ev)
	return ev
}

func TestParsePullRequest(t *testing.T) {
	const gh, gt, gl = "github-pull-request.json", "gitea-pull-request.json", "gitlab-merge-request.json"
	tests := []struct {
		name, forge, file string
		edits             map[string]any
		want              review.Event // zero when ignored or an error
		ignored, err      string       // parts of the reason or error
	}{
		{name: "github opened", forge: "github", file: gh, want: githubEvent},
		{name: "github reopened", forge: "github", file: gh, edits: map[string]any{"action": "reopened"}, want: githubEvent},
		{name: "github synchronize", forge: "github", file: gh, edits: map[string]any{"action": "synchronize"},
			want: with(githubEvent, func(e *review.Event) { e.Action = review.Pushed })},
		{name: "github closed", forge: "github", file: gh, edits: map[string]any{"action": "closed"},
			want: with(githubEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "github upper-case sha", forge: "github", file: gh,
			edits: map[string]any{"pull_request.head.sha": "6DCB09B5B57875F334F61AEBED695E2E4193DB5E"}, want: githubEvent},
		{name: "github fork", forge: "github", file: gh, edits: map[string]any{"pull_request.head.repo.full_name": "octocat/infra"},
			want: with(githubEvent, func(e *review.Event) { e.Fork = true })},
		{name: "github deleted fork", forge: "github", file: gh, edits: map[string]any{"pull_request.head.repo": nil},
			want: with(githubEvent, func(e *review.Event) { e.Fork = true })},
		{name: "github edited", forge: "github", file: gh, edits: map[string]any{"action": "edited"}, ignored: `github pull request action "edited"`},
		{name: "github labeled", forge: "github", file: gh, edits: map[string]any{"action": "labeled"}, ignored: `"labeled"`},
		{name: "github no number", forge: "github", file: gh, edits: map[string]any{"number": 0, "pull_request.number": 0}, err: "no pull-request number"},
		{name: "github short sha", forge: "github", file: gh, edits: map[string]any{"pull_request.head.sha": "6dcb09b"}, err: `head commit "6dcb09b" is not a 40-hex commit hash`},
		{name: "github closed without sha", forge: "github", file: gh, edits: map[string]any{"action": "closed", "pull_request.head.sha": ""},
			want: with(githubEvent, func(e *review.Event) { e.Action, e.HeadSHA = review.Closed, "" })},
		{name: "github no repository", forge: "github", file: gh, edits: map[string]any{"repository.full_name": ""}, err: "no base repository"},
		{name: "github no base branch", forge: "github", file: gh, edits: map[string]any{"pull_request.base.ref": ""}, err: "no base branch"},
		{name: "github not an object", forge: "github", file: gh, edits: map[string]any{"number": "twelve"}, err: "pull-request payload: json"},

		{name: "gitea synchronized", forge: "gitea", file: gt, want: giteaEvent},
		{name: "forgejo opened", forge: "forgejo", file: gt, edits: map[string]any{"action": "opened"},
			want: with(giteaEvent, func(e *review.Event) { e.Action = review.Opened })},
		{name: "gitea closed", forge: "gitea", file: gt, edits: map[string]any{"action": "closed"},
			want: with(giteaEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "gitea same repository", forge: "gitea", file: gt, edits: map[string]any{"pull_request.head.repo.full_name": "acme/infra"},
			want: with(giteaEvent, func(e *review.Event) { e.Fork = false })},
		{name: "gitea label_updated", forge: "gitea", file: gt, edits: map[string]any{"action": "label_updated"}, ignored: `gitea pull request action "label_updated"`},
		{name: "gitea reviewed", forge: "gitea", file: gt, edits: map[string]any{"action": "reviewed"}, ignored: `"reviewed"`},

		{name: "gitlab update with commits", forge: "gitlab", file: gl, want: gitlabEvent},
		{name: "gitlab update without commits", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.oldrev": nil},
			ignored: "without new commits"},
		{name: "gitlab open", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "open", "object_attributes.oldrev": nil},
			want: with(gitlabEvent, func(e *review.Event) { e.Action = review.Opened })},
		{name: "gitlab reopen", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "reopen"},
			want: with(gitlabEvent, func(e *review.Event) { e.Action = review.Opened })},
		{name: "gitlab close", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "close"},
			want: with(gitlabEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "gitlab merge", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "merge"},
			want: with(gitlabEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "gitlab fork", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.source_project_id": 42},
			want: with(gitlabEvent, func(e *review.Event) { e.Fork = true })},
		{name: "gitlab triggered by another user", forge: "gitlab", file: gl,
			edits: map[string]any{"user.id": 51, "user.username": "mallory", "object_attributes.action": "reopen"},
			want:  with(gitlabEvent, func(e *review.Event) { e.Action, e.Author = review.Opened, "" })},
		{name: "gitlab, another user's merge request", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.author_id": 51},
			want: with(gitlabEvent, func(e *review.Event) { e.Author = "" })},
		{name: "gitlab no user id", forge: "gitlab", file: gl, edits: map[string]any{"user.id": nil},
			want: with(gitlabEvent, func(e *review.Event) { e.Author = "" })},
		{name: "gitlab no ids", forge: "gitlab", file: gl, edits: map[string]any{"user.id": nil, "object_attributes.author_id": nil},
			want: with(gitlabEvent, func(e *review.Event) { e.Author = "" })},
		{name: "gitlab approved", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "approved"},
			ignored: `gitlab merge request action "approved"`},
		{name: "gitlab no iid", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.iid": 0}, err: "no pull-request number"},
		{name: "gitlab no last commit", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.last_commit": nil}, err: "is not a 40-hex commit hash"},
		{name: "gitlab no project", forge: "gitlab", file: gl, edits: map[string]any{"project": nil}, err: "no base repository"},
		{name: "gitlab not a merge request", forge: "gitlab", file: gl, edits: map[string]any{"object_kind": "push"}, err: `object_kind "push"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ignored, err := parsePullRequest(tt.forge, []byte(fixture(t, tt.file, tt.edits)))
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case tt.ignored != "":
				if !strings.Contains(ignored, tt.ignored) {
					t.Fatalf("ignored %q, want %q", ignored, tt.ignored)
				}
			case ignored != "":
				t.Fatalf("ignored: %s", ignored)
			}
			if !reflect.DeepEqual(ev, tt.want) {
				t.Fatalf("event\n%+v\nwant\n%+v", ev, tt.want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
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

func TestWebhookPullRequest(t *testing.T) {
	gh := fixture(t, "github-pull-request.json", nil)
	gt := fixture(t, "gitea-pull-request.json", nil)
	gl := fixture(t, "gitlab-merge-request.json", nil)
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   review.Event
	}{
		{"github", githubHeaders("pull_request", sign(hookSecret, gh)), gh, githubEvent},
		{"gitea", giteaHeaders("pull_request", sign(hookSecret, gt)), gt, giteaEvent},
		{"forgejo", http.Header{"X-Forgejo-Event": {"pull_request"}, "X-Forgejo-Signature": {sign(hookSecret, gt)}}, gt, giteaEvent},
		{"gitlab", gitlabHeaders("Merge Request Hook", hookSecret), gl, gitlabEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			previews := &fakePreviews{accepted: review.Accepted{Stacks: []string{"infra-dev", "infra-prod"}}}
			var logs syncBuffer
			_, url := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret, Token: "api-token", Previews: previews,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			code, v := callWith(t, "POST", url+webhookPath, tt.header, tt.body)
			if code != 202 || v["pullRequest"] != tt.want.Key() || !reflect.DeepEqual(v["stacks"], []any{"infra-dev", "infra-prod"}) {
				t.Fatalf("pull request = %d %v", code, v)
			}
			if evs := previews.taken(); len(evs) != 1 || !reflect.DeepEqual(evs[0], tt.want) {
				t.Fatalf("PullRequest calls = %+v, want %+v", evs, tt.want)
			}
			line := logs.String()
			for _, want := range []string{`msg="pull-request webhook"`, "repo=" + tt.want.Repo, "number=", "action=" + string(tt.want.Action), "stacks="} {
				if !strings.Contains(line, want) {
					t.Errorf("log lacks %q: %s", want, line)
				}
			}
			if strings.Contains(line, tt.want.Title) || strings.Contains(line, tt.want.HeadSHA) {
				t.Errorf("log shows the payload: %s", line)
			}
		})
	}
}

// TestWebhookPullRequestStacksNeverNull: an event that concerns no stack
// answers an empty list and the reason.
func TestWebhookPullRequestStacksNeverNull(t *testing.T) {
	previews := &fakePreviews{accepted: review.Accepted{Ignored: "no stack tracks acme/infra@main"}}
	_, url := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret, Previews: previews})
	gh := fixture(t, "github-pull-request.json", nil)
	_, body := send(t, "POST", url+webhookPath, githubHeaders("pull_request", sign(hookSecret, gh)), gh)
	var res review.Accepted
	if err := json.Unmarshal(body, &res); err != nil || res.Stacks == nil || !strings.Contains(string(body), `"stacks": []`) ||
		res.Ignored != "no stack tracks acme/infra@main" {
		t.Fatalf("answer %s (%v)", body, err)
	}
}

// TestWebhookPullRequestRejected: a pull-request event needs the
// signature like any other; a bad one reaches no preview.
func TestWebhookPullRequestRejected(t *testing.T) {
	previews := &fakePreviews{}
	_, url := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret, Previews: previews})
	gh := fixture(t, "github-pull-request.json", nil)
	gl := fixture(t, "gitlab-merge-request.json", nil)
	for name, h := range map[string]http.Header{
		"github unsigned":    {"X-Github-Event": {"pull_request"}},
		"github wrong key":   githubHeaders("pull_request", sign("other", gh)),
		"gitea unsigned":     {"X-Gitea-Event": {"pull_request"}},
		"gitlab wrong token": gitlabHeaders("Merge Request Hook", "nope"),
	} {
		body := gh
		if strings.HasPrefix(name, "gitlab") {
			body = gl
		}
		if code, v := callWith(t, "POST", url+webhookPath, h, body); code != 401 {
			t.Errorf("%s = %d %v, want 401", name, code, v)
		}
	}
	if evs := previews.taken(); len(evs) != 0 {
		t.Fatalf("previews took %+v", evs)
	}
}

// TestWebhookPullRequestIgnored: actions that need no preview, review
// events and any pull request while previews are off are acknowledged
// (202) and reach no preview; a payload that lacks what a preview needs
// is a 400.
func TestWebhookPullRequestIgnored(t *testing.T) {
	previews := &fakePreviews{}
	_, url := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret, Previews: previews})
	edited := fixture(t, "github-pull-request.json", map[string]any{"action": "edited"})
	reviewed := fixture(t, "gitea-pull-request.json", map[string]any{"action": "reviewed"})
	retitled := fixture(t, "gitlab-merge-request.json", map[string]any{"object_attributes.oldrev": nil})
	for name, req := range map[string]struct {
		h    http.Header
		body string
	}{
		"github edited":            {githubHeaders("pull_request", sign(hookSecret, edited)), edited},
		"github review":            {githubHeaders("pull_request_review", sign(hookSecret, edited)), edited},
		"gitea approved":           {giteaHeaders("pull_request_approved", sign(hookSecret, reviewed)), reviewed},
		"gitlab update, no commit": {gitlabHeaders("Merge Request Hook", hookSecret), retitled},
	} {
		if code, v := callWith(t, "POST", url+webhookPath, req.h, req.body); code != 202 || v["ignored"] == nil {
			t.Errorf("%s = %d %v, want 202 ignored", name, code, v)
		}
	}
	bad := fixture(t, "github-pull-request.json", map[string]any{"pull_request.head.sha": "main"})
	if code, v := callWith(t, "POST", url+webhookPath, githubHeaders("pull_request", sign(hookSecret, bad)), bad); code != 400 ||
		!strings.Contains(v["error"].(string), "not a 40-hex commit hash") {
		t.Errorf("bad head sha = %d %v, want 400", code, v)
	}
	if evs := previews.taken(); len(evs) != 0 {
		t.Fatalf("previews took %+v", evs)
	}

	_, off := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret})
	gh := fixture(t, "github-pull-request.json", nil)
	if code, v := callWith(t, "POST", off+webhookPath, githubHeaders("pull_request", sign(hookSecret, gh)), gh); code != 202 ||
		v["ignored"] != "pull-request previews are not configured (--forge)" {
		t.Errorf("without previews = %d %v", code, v)
	}
}
