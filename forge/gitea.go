package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"

	"github.com/stackd/stackd/daemon/review"
)

// giteaMaxComment is the longest comment stackd sends Gitea: Gitea sets
// no limit of its own (comments are LONGTEXT), so GitHub's is kept.
const giteaMaxComment = 65536

// giteaFilesPage is the page size asked for files: Gitea's default
// MAX_RESPONSE_ITEMS, past which it cuts.
const giteaFilesPage = 50

// giteaForge is review.Forge on Gitea and Forgejo.
type giteaForge struct {
	base  string
	token string
	hc    *http.Client
}

// newGitea talks to <base>/api/v1/ with token in "Authorization: token".
func newGitea(base, token string, hc *http.Client) (*giteaForge, error) {
	if base == "" {
		return nil, errors.New("gitea: no base url")
	}
	return &giteaForge{base: base, token: token, hc: hc}, nil
}

// client returns a client bound to ctx: the SDK takes its context per
// client, not per call. It asks the server nothing (no version probe).
func (g *giteaForge) client(ctx context.Context) (*gitea.Client, error) {
	opts := []gitea.ClientOption{
		gitea.SetHTTPClient(g.hc),
		gitea.SetGiteaVersion(""),
		gitea.SetContext(ctx),
	}
	if g.token != "" {
		opts = append(opts, gitea.SetToken(g.token))
	}
	return gitea.NewClient(g.base, opts...)
}

var _ review.StateFinder = (*giteaForge)(nil)

func (g *giteaForge) MaxComment() int { return giteaMaxComment }

// PullRequestState implements review.StateFinder with GET
// /repos/{owner}/{repo}/pulls/{index}: state (open or closed), merged
// and head.sha. A 404 is a pull request gone.
func (g *giteaForge) PullRequestState(ctx context.Context, repo string, number int) (review.PullRequestState, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s#%d", repo, number)
	}
	c, err := g.client(ctx)
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s#%d", repo, number)
	}
	pr, resp, err := c.GetPullRequest(owner, name, int64(number))
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return review.PullRequestState{Gone: true}, nil
	}
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s#%d", repo, number)
	}
	if pr.State != gitea.StateOpen && pr.State != gitea.StateClosed {
		return review.PullRequestState{}, g.wrap(fmt.Errorf("unknown state %q", pr.State), "get the state of %s#%d", repo, number)
	}
	st := review.PullRequestState{Open: pr.State == gitea.StateOpen, Merged: pr.HasMerged}
	if pr.Head != nil {
		st.HeadSHA = pr.Head.Sha
	}
	return st, nil
}

func (g *giteaForge) ChangedFiles(ctx context.Context, repo string, number int) ([]string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, g.wrap(err, "list files of %s#%d", repo, number)
	}
	c, err := g.client(ctx)
	if err != nil {
		return nil, g.wrap(err, "list files of %s#%d", repo, number)
	}
	files, err := giteaFiles(c, owner, name, int64(number))
	if err != nil {
		return nil, g.wrap(err, "list files of %s#%d", repo, number)
	}
	return files, nil
}

// giteaFiles lists a pull request's changed files, page after page.
func giteaFiles(c *gitea.Client, owner, name string, index int64) ([]string, error) {
	var p paths
	opts := gitea.ListPullRequestFilesOptions{ListOptions: gitea.ListOptions{Page: 1, PageSize: giteaFilesPage}}
	for range maxPages {
		files, resp, err := c.ListPullRequestFiles(owner, name, index, opts)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			p.add(f.Filename, f.PreviousFilename)
		}
		if resp.NextPage <= opts.Page {
			break
		}
		opts.Page = resp.NextPage
	}
	return p.list, nil
}

func (g *giteaForge) SetStatus(ctx context.Context, repo, sha string, st review.Status) error {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	c, err := g.client(ctx)
	if err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	// The SDK always sends target_url; Gitea takes "" as none.
	opts := gitea.CreateStatusOption{
		State:       gitea.StatusState(st.State),
		TargetURL:   st.TargetURL,
		Description: truncate(st.Description, descriptionMax),
		Context:     st.Context,
	}
	if _, _, err := c.CreateStatus(owner, name, sha, opts); err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	return nil
}

func (g *giteaForge) UpsertComment(ctx context.Context, repo string, number int, marker, body string, id int64) (int64, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return 0, g.wrap(err, "comment on %s#%d", repo, number)
	}
	c, err := g.client(ctx)
	if err != nil {
		return 0, g.wrap(err, "comment on %s#%d", repo, number)
	}
	cm := &giteaComments{c: c, owner: owner, repo: name, index: int64(number)}
	id, err = upsert(ctx, cm, marker, body, id)
	if err != nil {
		return 0, g.wrap(err, "comment on %s#%d", repo, number)
	}
	return id, nil
}

// wrap adds "gitea: <what>: " to err and masks the token.
func (g *giteaForge) wrap(err error, format string, args ...any) error {
	return redact(fmt.Errorf("gitea: "+format+": %w", append(args, err)...), g.token)
}

// giteaComments is the comment API of one pull request; c carries the
// call's context.
type giteaComments struct {
	c           *gitea.Client
	owner, repo string
	index       int64
}

func (c *giteaComments) edit(_ context.Context, id int64, body string) error {
	_, resp, err := c.c.EditIssueComment(c.owner, c.repo, id, gitea.EditIssueCommentOption{Body: body})
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("edit comment %d: %w", id, errGone)
	}
	if err != nil {
		return fmt.Errorf("edit comment %d: %w", id, err)
	}
	return nil
}

// find lists the comments, oldest first. Gitea answers them all at once
// (the endpoint takes no page), but a Link header is followed if a later
// version pages them.
func (c *giteaComments) find(_ context.Context, marker string) (int64, string, error) {
	opts := gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{Page: 1}}
	for range maxPages {
		list, resp, err := c.c.ListIssueComments(c.owner, c.repo, c.index, opts)
		if err != nil {
			return 0, "", fmt.Errorf("list comments: %w", err)
		}
		for _, cm := range list {
			if strings.Contains(cm.Body, marker) {
				return cm.ID, cm.Body, nil
			}
		}
		if resp.NextPage <= opts.Page {
			break
		}
		opts.Page = resp.NextPage
	}
	return 0, "", nil
}

func (c *giteaComments) create(_ context.Context, body string) (int64, error) {
	cm, _, err := c.c.CreateIssueComment(c.owner, c.repo, c.index, gitea.CreateIssueCommentOption{Body: body})
	if err != nil {
		return 0, fmt.Errorf("create comment: %w", err)
	}
	return cm.ID, nil
}
