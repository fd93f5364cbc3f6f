package web

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/web/webtest"
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
	gh := webtest.Payload(t, "github-pull-request.json", nil)
	gt := webtest.Payload(t, "gitea-pull-request.json", nil)
	gl := webtest.Payload(t, "gitlab-merge-request.json", nil)
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   review.Event
	}{
		{"github", githubHeaders("pull_request", sign(hookSecret, gh)), gh, webtest.GitHubEvent},
		{"gitea", giteaHeaders("pull_request", sign(hookSecret, gt)), gt, webtest.GiteaEvent},
		{"forgejo", http.Header{"X-Forgejo-Event": {"pull_request"}, "X-Forgejo-Signature": {sign(hookSecret, gt)}}, gt, webtest.GiteaEvent},
		{"gitlab", gitlabHeaders("Merge Request Hook", hookSecret), gl, webtest.GitLabEvent},
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
	gh := webtest.Payload(t, "github-pull-request.json", nil)
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
	gh := webtest.Payload(t, "github-pull-request.json", nil)
	gl := webtest.Payload(t, "gitlab-merge-request.json", nil)
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
	edited := webtest.Payload(t, "github-pull-request.json", map[string]any{"action": "edited"})
	reviewed := webtest.Payload(t, "gitea-pull-request.json", map[string]any{"action": "reviewed"})
	retitled := webtest.Payload(t, "gitlab-merge-request.json", map[string]any{"object_attributes.oldrev": nil})
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
	bad := webtest.Payload(t, "github-pull-request.json", map[string]any{"pull_request.head.sha": "main"})
	if code, v := callWith(t, "POST", url+webhookPath, githubHeaders("pull_request", sign(hookSecret, bad)), bad); code != 400 ||
		!strings.Contains(v["error"].(string), "not a 40-hex commit hash") {
		t.Errorf("bad head sha = %d %v, want 400", code, v)
	}
	if evs := previews.taken(); len(evs) != 0 {
		t.Fatalf("previews took %+v", evs)
	}

	_, off := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret})
	gh := webtest.Payload(t, "github-pull-request.json", nil)
	if code, v := callWith(t, "POST", off+webhookPath, githubHeaders("pull_request", sign(hookSecret, gh)), gh); code != 202 ||
		v["ignored"] != "pull-request previews are not configured (--forge)" {
		t.Errorf("without previews = %d %v", code, v)
	}
}
