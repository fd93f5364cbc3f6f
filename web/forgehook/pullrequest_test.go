package forgehook

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/web/webtest"
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
		{name: "github opened", forge: "github", file: gh, want: webtest.GitHubEvent},
		{name: "github reopened", forge: "github", file: gh, edits: map[string]any{"action": "reopened"}, want: webtest.GitHubEvent},
		{name: "github synchronize", forge: "github", file: gh, edits: map[string]any{"action": "synchronize"},
			want: with(webtest.GitHubEvent, func(e *review.Event) { e.Action = review.Pushed })},
		{name: "github closed", forge: "github", file: gh, edits: map[string]any{"action": "closed"},
			want: with(webtest.GitHubEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "github upper-case sha", forge: "github", file: gh,
			edits: map[string]any{"pull_request.head.sha": "6DCB09B5B57875F334F61AEBED695E2E4193DB5E"}, want: webtest.GitHubEvent},
		{name: "github fork", forge: "github", file: gh, edits: map[string]any{"pull_request.head.repo.full_name": "octocat/infra"},
			want: with(webtest.GitHubEvent, func(e *review.Event) { e.Fork = true })},
		{name: "github deleted fork", forge: "github", file: gh, edits: map[string]any{"pull_request.head.repo": nil},
			want: with(webtest.GitHubEvent, func(e *review.Event) { e.Fork = true })},
		{name: "github edited", forge: "github", file: gh, edits: map[string]any{"action": "edited"}, ignored: `github pull request action "edited"`},
		{name: "github labeled", forge: "github", file: gh, edits: map[string]any{"action": "labeled"}, ignored: `"labeled"`},
		{name: "github no number", forge: "github", file: gh, edits: map[string]any{"number": 0, "pull_request.number": 0}, err: "no pull-request number"},
		{name: "github short sha", forge: "github", file: gh, edits: map[string]any{"pull_request.head.sha": "6dcb09b"}, err: `head commit "6dcb09b" is not a 40-hex commit hash`},
		{name: "github closed without sha", forge: "github", file: gh, edits: map[string]any{"action": "closed", "pull_request.head.sha": ""},
			want: with(webtest.GitHubEvent, func(e *review.Event) { e.Action, e.HeadSHA = review.Closed, "" })},
		{name: "github no repository", forge: "github", file: gh, edits: map[string]any{"repository.full_name": ""}, err: "no base repository"},
		{name: "github no base branch", forge: "github", file: gh, edits: map[string]any{"pull_request.base.ref": ""}, err: "no base branch"},
		{name: "github not an object", forge: "github", file: gh, edits: map[string]any{"number": "twelve"}, err: "pull-request payload: json"},

		{name: "gitea synchronized", forge: "gitea", file: gt, want: webtest.GiteaEvent},
		{name: "forgejo opened", forge: "forgejo", file: gt, edits: map[string]any{"action": "opened"},
			want: with(webtest.GiteaEvent, func(e *review.Event) { e.Action = review.Opened })},
		{name: "gitea closed", forge: "gitea", file: gt, edits: map[string]any{"action": "closed"},
			want: with(webtest.GiteaEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "gitea same repository", forge: "gitea", file: gt, edits: map[string]any{"pull_request.head.repo.full_name": "acme/infra"},
			want: with(webtest.GiteaEvent, func(e *review.Event) { e.Fork = false })},
		{name: "gitea label_updated", forge: "gitea", file: gt, edits: map[string]any{"action": "label_updated"}, ignored: `gitea pull request action "label_updated"`},
		{name: "gitea reviewed", forge: "gitea", file: gt, edits: map[string]any{"action": "reviewed"}, ignored: `"reviewed"`},

		{name: "gitlab update with commits", forge: "gitlab", file: gl, want: webtest.GitLabEvent},
		{name: "gitlab update without commits", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.oldrev": nil},
			ignored: "without new commits"},
		{name: "gitlab open", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "open", "object_attributes.oldrev": nil},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Action = review.Opened })},
		{name: "gitlab reopen", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "reopen"},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Action = review.Opened })},
		{name: "gitlab close", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "close"},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "gitlab merge", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "merge"},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Action = review.Closed })},
		{name: "gitlab fork", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.source_project_id": 42},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Fork = true })},
		{name: "gitlab triggered by another user", forge: "gitlab", file: gl,
			edits: map[string]any{"user.id": 51, "user.username": "mallory", "object_attributes.action": "reopen"},
			want:  with(webtest.GitLabEvent, func(e *review.Event) { e.Action, e.Author = review.Opened, "" })},
		{name: "gitlab, another user's merge request", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.author_id": 51},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Author = "" })},
		{name: "gitlab no user id", forge: "gitlab", file: gl, edits: map[string]any{"user.id": nil},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Author = "" })},
		{name: "gitlab no ids", forge: "gitlab", file: gl, edits: map[string]any{"user.id": nil, "object_attributes.author_id": nil},
			want: with(webtest.GitLabEvent, func(e *review.Event) { e.Author = "" })},
		{name: "gitlab approved", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.action": "approved"},
			ignored: `gitlab merge request action "approved"`},
		{name: "gitlab no iid", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.iid": 0}, err: "no pull-request number"},
		{name: "gitlab no last commit", forge: "gitlab", file: gl, edits: map[string]any{"object_attributes.last_commit": nil}, err: "is not a 40-hex commit hash"},
		{name: "gitlab no project", forge: "gitlab", file: gl, edits: map[string]any{"project": nil}, err: "no base repository"},
		{name: "gitlab not a merge request", forge: "gitlab", file: gl, edits: map[string]any{"object_kind": "push"}, err: `object_kind "push"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ignored, err := ParsePullRequest(tt.forge, []byte(webtest.Payload(t, tt.file, tt.edits)))
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
