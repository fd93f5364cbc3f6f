package forgehook

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/review"
)

// isPullRequestEvent reports whether a forge's event name is a pull
// (merge) request's. Gitea and Forgejo name several events
// "pull_request…" (their actions tell which matter).
func isPullRequestEvent(forge, event string) bool {
	switch forge {
	case "github":
		return event == "pull_request"
	case "gitlab":
		return event == "Merge Request Hook"
	}
	return strings.HasPrefix(event, "pull_request")
}

// ParsePullRequest reads a verified pull-request payload of forge
// ("github", "gitlab", "gitea" or "forgejo": Hook.Forge). It returns the event, or
// why the event needs nothing (ignored), or a payload error.
func ParsePullRequest(forge string, body []byte) (ev review.Event, ignored string, err error) {
	if forge == "gitlab" {
		ev, ignored, err = parseGitLabMergeRequest(body)
	} else {
		ev, ignored, err = parseGitHubPullRequest(forge, body)
	}
	if err != nil || ignored != "" {
		return review.Event{}, ignored, err
	}
	if err := validEvent(ev); err != nil {
		return review.Event{}, "", fmt.Errorf("pull-request payload: %w", err)
	}
	return ev, "", nil
}

// validEvent checks what a preview needs of an event: a number, a base
// repository and branch, and (unless it is closed) a head commit.
func validEvent(ev review.Event) error {
	switch {
	case ev.Number <= 0:
		return errors.New("no pull-request number")
	case ev.Repo == "":
		return errors.New("no base repository")
	case ev.BaseBranch == "":
		return errors.New("no base branch")
	case ev.Action != review.Closed && !isCommitHash(ev.HeadSHA):
		return fmt.Errorf("head commit %q is not a 40-hex commit hash", shorten(ev.HeadSHA, 80))
	}
	return nil
}

// isCommitHash reports whether s is a 40-character hexadecimal SHA-1.
func isCommitHash(s string) bool {
	return len(s) == 40 && strings.Trim(s, "0123456789abcdef") == ""
}

// shorten cuts s to at most n runes, for echoing payload values.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// prRepo holds the fields of a repository (GitHub, Gitea) or project
// (GitLab) in a pull-request payload.
type prRepo struct {
	FullName          string `json:"full_name"`
	PathWithNamespace string `json:"path_with_namespace"`
	CloneURL          string `json:"clone_url"`
	SSHURL            string `json:"ssh_url"`
	HTMLURL           string `json:"html_url"`
	GitURL            string `json:"git_url"`
	GitHTTPURL        string `json:"git_http_url"`
	GitSSHURL         string `json:"git_ssh_url"`
	WebURL            string `json:"web_url"`
	HTTPURL           string `json:"http_url"`
}

// urls lists the repository's URLs, without blanks or repeats.
func (r prRepo) urls() []string {
	var out []string
	for _, u := range []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL, r.GitHTTPURL, r.GitSSHURL, r.WebURL, r.HTTPURL} {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// githubPullRequest is the part of a GitHub pull_request payload stackd
// reads; Gitea and Forgejo send the same shape.
type githubPullRequest struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
	PullRequest struct {
		Number  int    `json:"number"`
		Title   string `json:"title"`
		HTMLURL string `json:"html_url"`
		User    struct {
			Login string `json:"login"`
		} `json:"user"`
		Head githubBranch `json:"head"`
		Base githubBranch `json:"base"`
	} `json:"pull_request"`
	Repository prRepo `json:"repository"`
}

// githubBranch is a pull request's head or base; Repo is null once a
// fork's repository was deleted.
type githubBranch struct {
	Ref  string  `json:"ref"`
	SHA  string  `json:"sha"`
	Repo *prRepo `json:"repo"`
}

// githubActions maps the actions of GitHub, Gitea and Forgejo that need
// something done; the others are ignored.
var githubActions = map[string]review.Action{
	"opened":       review.Opened,
	"reopened":     review.Opened,
	"synchronize":  review.Pushed, // GitHub
	"synchronized": review.Pushed, // Gitea, Forgejo
	"closed":       review.Closed,
}

// parseGitHubPullRequest reads a GitHub, Gitea or Forgejo payload.
func parseGitHubPullRequest(forge string, body []byte) (review.Event, string, error) {
	var p githubPullRequest
	if err := json.Unmarshal(body, &p); err != nil {
		return review.Event{}, "", fmt.Errorf("pull-request payload: %w", err)
	}
	action, ok := githubActions[p.Action]
	if !ok {
		return review.Event{}, fmt.Sprintf("%s pull request action %q", forge, shorten(p.Action, 40)), nil
	}
	pr := &p.PullRequest
	ev := review.Event{Forge: review.GitHub, Action: action, Repo: p.Repository.FullName, URLs: p.Repository.urls(),
		Number: p.Number, BaseBranch: pr.Base.Ref, HeadSHA: strings.ToLower(pr.Head.SHA), HeadBranch: pr.Head.Ref,
		Author: pr.User.Login, Title: pr.Title, WebURL: pr.HTMLURL}
	if forge != "github" {
		ev.Forge = review.Gitea
	}
	if ev.Number == 0 {
		ev.Number = pr.Number
	}
	base := p.Repository.FullName
	if pr.Base.Repo != nil && pr.Base.Repo.FullName != "" {
		base = pr.Base.Repo.FullName
	}
	ev.Fork = pr.Head.Repo == nil || !strings.EqualFold(pr.Head.Repo.FullName, base)
	return ev, "", nil
}

// gitlabMergeRequest is the part of a GitLab "Merge Request Hook"
// payload stackd reads.
type gitlabMergeRequest struct {
	ObjectKind string `json:"object_kind"`
	// User is who triggered the event: the author, or whoever pushed,
	// reopened or merged.
	User struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
	Project prRepo `json:"project"`
	Attrs   struct {
		IID             int    `json:"iid"`
		Action          string `json:"action"`
		OldRev          string `json:"oldrev"`
		Title           string `json:"title"`
		URL             string `json:"url"`
		SourceBranch    string `json:"source_branch"`
		TargetBranch    string `json:"target_branch"`
		SourceProjectID int64  `json:"source_project_id"`
		TargetProjectID int64  `json:"target_project_id"`
		AuthorID        int64  `json:"author_id"`
		LastCommit      struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// gitlabActions maps GitLab's merge-request actions that need something
// done; "update" needs it only with new commits (oldrev set).
var gitlabActions = map[string]review.Action{
	"open":   review.Opened,
	"reopen": review.Opened,
	"update": review.Pushed,
	"close":  review.Closed,
	"merge":  review.Closed,
}

// parseGitLabMergeRequest reads a GitLab merge-request payload.
func parseGitLabMergeRequest(body []byte) (review.Event, string, error) {
	var p gitlabMergeRequest
	if err := json.Unmarshal(body, &p); err != nil {
		return review.Event{}, "", fmt.Errorf("merge-request payload: %w", err)
	}
	if p.ObjectKind != "merge_request" {
		return review.Event{}, "", fmt.Errorf("merge-request payload: object_kind %q, want merge_request", shorten(p.ObjectKind, 40))
	}
	a := &p.Attrs
	action, ok := gitlabActions[a.Action]
	switch {
	case !ok:
		return review.Event{}, fmt.Sprintf("gitlab merge request action %q", shorten(a.Action, 40)), nil
	case action == review.Pushed && a.OldRev == "":
		return review.Event{}, "gitlab merge request update without new commits", nil
	}
	return review.Event{Forge: review.GitLab, Action: action, Repo: p.Project.PathWithNamespace, URLs: p.Project.urls(),
		Number: a.IID, BaseBranch: a.TargetBranch, HeadSHA: strings.ToLower(a.LastCommit.ID), HeadBranch: a.SourceBranch,
		Fork: a.SourceProjectID != a.TargetProjectID, Author: p.author(), Title: a.Title, WebURL: a.URL}, "", nil
}

// author is the merge request's author's username when the payload
// tells it: the payload gives only the author's id, so the user who
// triggered the event is the author only when the ids match. Otherwise
// it is "" (previews ask the forge), never the name of whoever pushed
// or reopened.
func (p *gitlabMergeRequest) author() string {
	if p.User.ID != 0 && p.User.ID == p.Attrs.AuthorID {
		return p.User.Username
	}
	return ""
}
