package forge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/stackd/stackd/daemon/review"
)

var (
	_ review.AuthorFinder = (*gitLab)(nil)
	_ review.StateFinder  = (*gitLab)(nil)
)

// gitlabMaxComment is the longest note GitLab takes.
const gitlabMaxComment = 1000000

// gitLab is review.Forge on GitLab.com and self-managed GitLab. Repos
// are projects' full paths, "group/subgroup/name".
type gitLab struct {
	c     *gitlab.Client
	token string
	log   *slog.Logger
}

// newGitLab talks to <base>/api/v4/ ("" means gitlab.com) with token as
// a personal, group or project access token (PRIVATE-TOKEN header).
func newGitLab(base, token string, hc *http.Client, log *slog.Logger) (*gitLab, error) {
	opts := []gitlab.ClientOptionFunc{
		gitlab.WithHTTPClient(hc),
		// hc retries; the library's own retryablehttp loop would
		// multiply the attempts and ignore our backoff.
		gitlab.WithoutRetries(),
		gitlab.WithURLWarningLogger(log),
	}
	if base != "" {
		opts = append(opts, gitlab.WithBaseURL(base))
	}
	// An empty token would still send an empty PRIVATE-TOKEN header.
	var auth gitlab.AuthSource = gitlab.AccessTokenAuthSource{Token: token}
	if token == "" {
		auth = gitlab.Unauthenticated{}
	}
	c, err := gitlab.NewAuthSourceClient(auth, opts...)
	if err != nil {
		return nil, redact(fmt.Errorf("gitlab: new client: %w", err), token)
	}
	return &gitLab{c: c, token: token, log: log}, nil
}

func (g *gitLab) MaxComment() int { return gitlabMaxComment }

func (g *gitLab) ChangedFiles(ctx context.Context, repo string, number int) ([]string, error) {
	if err := checkProjectPath(repo); err != nil {
		return nil, g.wrap(err, "list files of %s!%d", repo, number)
	}
	var p paths
	opts := &gitlab.ListMergeRequestDiffsOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for range maxPages {
		diffs, resp, err := g.c.MergeRequests.ListMergeRequestDiffs(repo, int64(number), opts, gitlab.WithContext(ctx))
		if err != nil {
			return nil, g.wrap(err, "list files of %s!%d", repo, number)
		}
		for _, d := range diffs {
			p.add(d.NewPath, d.OldPath)
		}
		if resp.NextPage <= opts.Page {
			break
		}
		opts.Page = resp.NextPage
	}
	return p.list, nil
}

// PullRequestAuthor implements review.AuthorFinder: GitLab's merge
// request webhooks name who triggered the event and only the id of the
// merge request's author.
func (g *gitLab) PullRequestAuthor(ctx context.Context, repo string, number int) (string, error) {
	if err := checkProjectPath(repo); err != nil {
		return "", g.wrap(err, "get the author of %s!%d", repo, number)
	}
	mr, _, err := g.c.MergeRequests.GetMergeRequest(repo, int64(number), nil, gitlab.WithContext(ctx))
	if err != nil {
		return "", g.wrap(err, "get the author of %s!%d", repo, number)
	}
	if mr.Author == nil || mr.Author.Username == "" {
		return "", g.wrap(errors.New("the answer names no author"), "get the author of %s!%d", repo, number)
	}
	return mr.Author.Username, nil
}

// PullRequestState implements review.StateFinder with GET
// /projects/:id/merge_requests/:iid: state (opened, closed, merged, or
// locked while it is being merged, which counts as open) and sha, the
// head commit. A 404 is a merge request gone.
func (g *gitLab) PullRequestState(ctx context.Context, repo string, number int) (review.PullRequestState, error) {
	if err := checkProjectPath(repo); err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s!%d", repo, number)
	}
	mr, _, err := g.c.MergeRequests.GetMergeRequest(repo, int64(number), nil, gitlab.WithContext(ctx))
	if errors.Is(err, gitlab.ErrNotFound) {
		return review.PullRequestState{Gone: true}, nil
	}
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s!%d", repo, number)
	}
	st, err := gitlabState(mr.State)
	if err != nil {
		return review.PullRequestState{}, g.wrap(err, "get the state of %s!%d", repo, number)
	}
	st.HeadSHA = mr.SHA
	return st, nil
}

// gitlabState reads a merge request's state: opened, or locked while
// GitLab merges it, is open; closed and merged are not. Any other word
// is an error, never a closing.
func gitlabState(state string) (review.PullRequestState, error) {
	switch state {
	case "opened", "locked":
		return review.PullRequestState{Open: true}, nil
	case "closed":
		return review.PullRequestState{}, nil
	case "merged":
		return review.PullRequestState{Merged: true}, nil
	}
	return review.PullRequestState{}, fmt.Errorf("unknown state %q", state)
}

// gitlabStates maps review's states to GitLab's.
var gitlabStates = map[review.State]gitlab.BuildStateValue{
	review.Pending: gitlab.Pending,
	review.Success: gitlab.Success,
	review.Failure: gitlab.Failed,
	review.Error:   gitlab.Canceled,
}

// SetStatus sets a commit status named st.Context. GitLab refuses to set
// a state the status already has ("Cannot transition status"); that is
// taken as done.
func (g *gitLab) SetStatus(ctx context.Context, repo, sha string, st review.Status) error {
	state, ok := gitlabStates[st.State]
	if !ok {
		return g.wrap(fmt.Errorf("unknown state %q", st.State), "set status of %s on %s", sha, repo)
	}
	if err := checkProjectPath(repo); err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	opts := &gitlab.SetCommitStatusOptions{State: state, Name: gitlab.Ptr(st.Context)}
	if st.Description != "" {
		opts.Description = gitlab.Ptr(truncate(st.Description, descriptionMax))
	}
	if st.TargetURL != "" {
		opts.TargetURL = gitlab.Ptr(st.TargetURL)
	}
	_, resp, err := g.c.Commits.SetCommitStatus(repo, sha, opts, gitlab.WithContext(ctx))
	if sameState(resp, err) {
		g.log.DebugContext(ctx, "commit status already set", "repo", repo, "sha", sha, "context", st.Context)
		return nil
	}
	if err != nil {
		return g.wrap(err, "set status of %s on %s", sha, repo)
	}
	return nil
}

// sameState tells whether GitLab refused a status for having that state
// already.
func sameState(resp *gitlab.Response, err error) bool {
	var e *gitlab.ErrorResponse
	return resp != nil && resp.StatusCode == http.StatusBadRequest &&
		errors.As(err, &e) && strings.Contains(e.Message, "Cannot transition status")
}

func (g *gitLab) UpsertComment(ctx context.Context, repo string, number int, marker, body string, id int64) (int64, error) {
	if err := checkProjectPath(repo); err != nil {
		return 0, g.wrap(err, "comment on %s!%d", repo, number)
	}
	c := &gitlabNotes{c: g.c, project: repo, iid: int64(number)}
	id, err := upsert(ctx, c, marker, body, id)
	if err != nil {
		return 0, g.wrap(err, "comment on %s!%d", repo, number)
	}
	return id, nil
}

// wrap adds "gitlab: <what>: " to err and masks the token.
func (g *gitLab) wrap(err error, format string, args ...any) error {
	return redact(fmt.Errorf("gitlab: "+format+": %w", append(args, err)...), g.token)
}

// gitlabNotes is the note API of one merge request.
type gitlabNotes struct {
	c       *gitlab.Client
	project string
	iid     int64
}

func (c *gitlabNotes) edit(ctx context.Context, id int64, body string) error {
	opts := &gitlab.UpdateMergeRequestNoteOptions{Body: &body}
	_, _, err := c.c.Notes.UpdateMergeRequestNote(c.project, c.iid, id, opts, gitlab.WithContext(ctx))
	if errors.Is(err, gitlab.ErrNotFound) {
		return fmt.Errorf("edit note %d: %w", id, errGone)
	}
	if err != nil {
		return fmt.Errorf("edit note %d: %w", id, err)
	}
	return nil
}

// find lists notes oldest first (GitLab's default is newest first).
func (c *gitlabNotes) find(ctx context.Context, marker string) (int64, string, error) {
	opts := &gitlab.ListMergeRequestNotesOptions{
		ListOptions: gitlab.ListOptions{PerPage: 100},
		OrderBy:     gitlab.Ptr("created_at"),
		Sort:        gitlab.Ptr("asc"),
	}
	for range maxPages {
		notes, resp, err := c.c.Notes.ListMergeRequestNotes(c.project, c.iid, opts, gitlab.WithContext(ctx))
		if err != nil {
			return 0, "", fmt.Errorf("list notes: %w", err)
		}
		for _, n := range notes {
			if !n.System && strings.Contains(n.Body, marker) {
				return n.ID, n.Body, nil
			}
		}
		if resp.NextPage <= opts.Page {
			break
		}
		opts.Page = resp.NextPage
	}
	return 0, "", nil
}

func (c *gitlabNotes) create(ctx context.Context, body string) (int64, error) {
	opts := &gitlab.CreateMergeRequestNoteOptions{Body: &body}
	n, _, err := c.c.Notes.CreateMergeRequestNote(c.project, c.iid, opts, gitlab.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("create note: %w", err)
	}
	return n.ID, nil
}
