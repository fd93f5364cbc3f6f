package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v84/github"

	"github.com/stackd/stackd/daemon/review"
)

// githubMaxComment is the longest issue comment GitHub takes.
const githubMaxComment = 65536

// gitHub is review.Forge on GitHub.com, GitHub Enterprise Cloud and
// Server.
type gitHub struct {
	c     *github.Client
	token string
}

// newGitHub serves base: "" or https://github.com talk to
// https://api.github.com/; a GHE.com tenant https://NAME.ghe.com to
// https://api.NAME.ghe.com/; any other address is GitHub Enterprise
// Server, at <base>/api/v3/.
func newGitHub(base, token string, hc *http.Client) (*gitHub, error) {
	c := github.NewClient(hc)
	if api := githubAPI(base); api != "" {
		var err error
		if c, err = c.WithEnterpriseURLs(api, api); err != nil {
			return nil, fmt.Errorf("github: base url: %w", redact(err, token))
		}
	}
	if token != "" {
		c = c.WithAuthToken(token)
	}
	return &gitHub{c: c, token: token}, nil
}

// githubAPI returns the API address for base, "" for the client's default
// (api.github.com).
func githubAPI(base string) string {
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case host == "github.com" || host == "www.github.com" || host == "api.github.com":
		return ""
	case strings.HasSuffix(host, ".ghe.com") && !strings.HasPrefix(host, "api."):
		return u.Scheme + "://api." + u.Host + "/"
	}
	return base + "/"
}

var _ review.StateFinder = (*gitHub)(nil)

func (g *gitHub) MaxComment() int { return githubMaxComment }

// PullRequestState implements review.StateFinder with GET
// /repos/{owner}/{repo}/pulls/{number}: state (open or closed), merged
// and head.sha. A 404 is a pull request gone.
func (g *gitHub) PullRequestState(ctx context.Context, repo string, number int) (review.PullRequestState, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s#%d", repo, number)
	}
	pr, resp, err := g.c.PullRequests.Get(ctx, owner, name, number)
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return review.PullRequestState{Gone: true}, nil
	}
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s#%d", repo, number)
	}
	if st := pr.GetState(); st != "open" && st != "closed" {
		return review.PullRequestState{}, g.wrap(fmt.Errorf("unknown state %q", st), "get the state of %s#%d", repo, number)
	}
	return review.PullRequestState{Open: pr.GetState() == "open", Merged: pr.GetMerged(),
		HeadSHA: pr.GetHead().GetSHA()}, nil
}

func (g *gitHub) ChangedFiles(ctx context.Context, repo string, number int) ([]string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, g.wrap(err, "list files of %s#%d", repo, number)
	}
	var p paths
	opts := &github.ListOptions{PerPage: 100}
	for range maxPages {
		files, resp, err := g.c.PullRequests.ListFiles(ctx, owner, name, number, opts)
		if err != nil {
			return nil, g.wrap(err, "list files of %s#%d", repo, number)
		}
		for _, f := range files {
			p.add(f.GetFilename(), f.GetPreviousFilename())
		}
		if resp.NextPage <= opts.Page {
			break
		}
		opts.Page = resp.NextPage
	}
	return p.list, nil
}

func (g *gitHub) SetStatus(ctx context.Context, repo, sha string, st review.Status) error {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	status := github.RepoStatus{
		State:   github.Ptr(string(st.State)),
		Context: github.Ptr(st.Context),
	}
	if st.Description != "" {
		status.Description = github.Ptr(truncate(st.Description, descriptionMax))
	}
	if st.TargetURL != "" {
		status.TargetURL = github.Ptr(st.TargetURL)
	}
	if _, _, err := g.c.Repositories.CreateStatus(ctx, owner, name, sha, status); err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	return nil
}

func (g *gitHub) UpsertComment(ctx context.Context, repo string, number int, marker, body string, id int64) (int64, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return 0, g.wrap(err, "comment on %s#%d", repo, number)
	}
	c := &githubComments{c: g.c, owner: owner, repo: name, number: number}
	id, err = upsert(ctx, c, marker, body, id)
	if err != nil {
		return 0, g.wrap(err, "comment on %s#%d", repo, number)
	}
	return id, nil
}

// wrap adds "github: <what>: " to err and masks the token.
func (g *gitHub) wrap(err error, format string, args ...any) error {
	return redact(fmt.Errorf("github: "+format+": %w", append(args, err)...), g.token)
}

// githubComments is the comment API of one pull request.
type githubComments struct {
	c           *github.Client
	owner, repo string
	number      int
}

func (c *githubComments) edit(ctx context.Context, id int64, body string) error {
	_, resp, err := c.c.Issues.EditComment(ctx, c.owner, c.repo, id, &github.IssueComment{Body: &body})
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("edit comment %d: %w", id, errGone)
	}
	if err != nil {
		return fmt.Errorf("edit comment %d: %w", id, err)
	}
	return nil
}

func (c *githubComments) find(ctx context.Context, marker string) (int64, string, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for range maxPages {
		list, resp, err := c.c.Issues.ListComments(ctx, c.owner, c.repo, c.number, opts)
		if err != nil {
			return 0, "", fmt.Errorf("list comments: %w", err)
		}
		for _, cm := range list {
			if strings.Contains(cm.GetBody(), marker) {
				return cm.GetID(), cm.GetBody(), nil
			}
		}
		if resp.NextPage <= opts.Page {
			break
		}
		opts.Page = resp.NextPage
	}
	return 0, "", nil
}

func (c *githubComments) create(ctx context.Context, body string) (int64, error) {
	cm, _, err := c.c.Issues.CreateComment(ctx, c.owner, c.repo, c.number, &github.IssueComment{Body: &body})
	if err != nil {
		return 0, fmt.Errorf("create comment: %w", err)
	}
	return cm.GetID(), nil
}
