// Package review holds what previews of pull requests are made of and
// that needs no I/O: the pull-request event a webhook carries, the Forge
// interface the forge clients implement, which forge serves a repository,
// which stacks a pull request concerns, and the comment that reports the
// previews.
package review

import (
	"context"
	"net/url"
	"strconv"
	"strings"
)

// Kind is a forge's kind.
type Kind string

// The forges stackd reports to.
const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
	Gitea  Kind = "gitea" // Forgejo too
)

// ParseKind reads a kind as written on the command line.
func ParseKind(s string) (Kind, bool) {
	switch k := Kind(strings.ToLower(s)); k {
	case GitHub, GitLab, Gitea:
		return k, true
	case "forgejo":
		return Gitea, true
	}
	return "", false
}

// Action is what happened to a pull request.
type Action string

// The actions that matter: a head commit to preview, or the end.
const (
	Opened Action = "opened" // opened or reopened
	Pushed Action = "pushed" // a new head commit
	Closed Action = "closed" // closed or merged
)

// Event is a pull request (a merge request on GitLab) as a webhook
// describes it, once its signature was checked.
type Event struct {
	Forge  Kind
	Action Action
	// Repo is the base repository's path on its forge: "owner/name", or a
	// GitLab project's full path "group/subgroup/name".
	Repo string
	// URLs are the base repository's URLs (clone, SSH, web): a stack's
	// projectRepo is matched against them.
	URLs   []string
	Number int
	// BaseBranch is the branch the pull request merges into.
	BaseBranch string
	// HeadSHA is the pull request's head commit; HeadBranch its branch.
	HeadSHA    string
	HeadBranch string
	// Fork is set when the head branch lives in another repository.
	Fork bool
	// Author is the username of the pull request's author, when the
	// payload names it: GitHub's and Gitea's do; GitLab's names the user
	// who triggered the event, which is the author only when its id is
	// the merge request's author_id. Empty when unknown: AuthorFinder
	// asks the forge.
	Author string
	Title  string
	WebURL string
	// Sweep, set by stackd and never by a forge, asks the holder of the
	// pull request (in a cluster) to destroy its review stacks that
	// expired: it is the expiry instant, in Unix seconds, that asked.
	Sweep int64 `json:",omitempty"`
	// Touch, set by stackd and never by a forge, marks an event that
	// repeats its pull request's head commit (in a cluster): activity for
	// the review stacks at that instant, in Unix milliseconds, and no new
	// round.
	Touch int64 `json:",omitempty"`
}

// WorkKey names the work ev asks for: the round of its head commit, the
// closing of its pull request, a sweep of its expired review stacks, or
// activity on its review stacks (a touch).
// A record whose Done is ev's WorkKey has that work done.
func (e Event) WorkKey() string {
	k := e.HeadSHA
	if e.Action == Closed {
		k += "/closed"
	}
	if e.Sweep != 0 {
		k += "/sweep-" + strconv.FormatInt(e.Sweep, 10)
	}
	if e.Touch != 0 {
		k += "/touch-" + strconv.FormatInt(e.Touch, 10)
	}
	return k
}

// Repeats says whether e, a new event of its pull request, repeats prev,
// the one before it: both open, at the same head commit. It asks for no
// new round, and is activity all the same.
func (e Event) Repeats(prev Event) bool {
	return e.HeadSHA != "" && e.HeadSHA == prev.HeadSHA && e.Action != Closed && prev.Action != Closed
}

// RoundDone says whether done, a record's Done, means that the round of
// head commit head ended.
func RoundDone(done, head string) bool {
	return head != "" && (done == head || strings.HasPrefix(done, head+"/"))
}

// Key names the pull request across pushes.
func (e Event) Key() string {
	return string(e.Forge) + ":" + e.Repo + "#" + strconv.Itoa(e.Number)
}

// HeadRef is the ref under which the base repository serves the pull
// request's head commit, forks included.
func (e Event) HeadRef() string {
	if e.Forge == GitLab {
		return "refs/merge-requests/" + strconv.Itoa(e.Number) + "/head"
	}
	return "refs/pull/" + strconv.Itoa(e.Number) + "/head"
}

// State is a commit status's state.
type State string

// The states stackd sets; each forge client maps them to its own words.
const (
	Pending State = "pending"
	Success State = "success"
	Failure State = "failure"
	// Error ends a status whose preview will not finish: its commit was
	// superseded by a newer push, or the pull request closed. GitLab
	// calls it canceled.
	Error State = "error"
)

// Status is one commit status.
type Status struct {
	// Context names the status: "stackd/<stack>".
	Context string
	State   State
	// Description is one short line (forges cap it near 140 characters).
	Description string
	// TargetURL links to the preview's page; empty for none.
	TargetURL string
}

// Forge reports previews on one forge. Its methods are safe for
// concurrent use, retry answers 5xx and 429 with backoff until ctx ends,
// and never show the token in an error.
type Forge interface {
	// ChangedFiles lists the paths a pull request changes, both sides of
	// a rename.
	ChangedFiles(ctx context.Context, repo string, number int) ([]string, error)
	// SetStatus sets a commit status on the commit sha.
	SetStatus(ctx context.Context, repo, sha string, st Status) error
	// UpsertComment makes body the one comment of the pull request that
	// holds marker and returns its ID. A nonzero id (returned earlier) is
	// edited directly; otherwise, or if that comment is gone, the
	// comments are listed and the one holding marker is edited, or a new
	// one is created.
	UpsertComment(ctx context.Context, repo string, number int, marker, body string, id int64) (int64, error)
	// MaxComment is the largest comment body the forge takes, in bytes.
	MaxComment() int
}

// AuthorFinder is implemented by the forges whose webhooks may not name
// a pull request's author (GitLab).
type AuthorFinder interface {
	// PullRequestAuthor returns the username of the author of pull
	// request number of repo, as the forge's API tells it.
	PullRequestAuthor(ctx context.Context, repo string, number int) (string, error)
}

// PullRequestState is a pull request as its forge tells it now.
type PullRequestState struct {
	// Open is false once the pull request is closed or merged (GitLab:
	// closed or merged; a locked merge request, being merged, is open).
	Open   bool
	Merged bool
	// Gone is set when the forge does not know the pull request (it
	// answered 404): deleted, or its repository is no longer readable
	// with the token. Open is then false.
	Gone bool
	// HeadSHA is its head commit; empty when the forge did not name it.
	HeadSHA string
}

// StateFinder is implemented by the forges that can tell a pull
// request's state, so that stackd catches up with the closings and
// pushes whose webhooks it missed.
type StateFinder interface {
	// PullRequestState returns the state of pull request number of repo.
	// A pull request the forge does not know is no error: its state is
	// Gone.
	PullRequestState(ctx context.Context, repo string, number int) (PullRequestState, error)
}

// Host is the host (with a port other than the scheme's default) a
// repository URL names: https://, http://, ssh:// and scp-like
// git@host:path alike. Empty when url names none.
func Host(raw string) string {
	if !strings.Contains(raw, "://") {
		at := strings.LastIndexByte(raw, '@')
		colon := strings.IndexByte(raw, ':')
		if colon < 0 || colon < at {
			return ""
		}
		return strings.ToLower(raw[at+1 : colon])
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := strings.ToLower(u.Host)
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	switch {
	case u.Scheme == "https" && strings.HasSuffix(host, ":443"),
		u.Scheme == "http" && strings.HasSuffix(host, ":80"),
		u.Scheme == "ssh" && strings.HasSuffix(host, ":22"):
		host = host[:strings.LastIndexByte(host, ':')]
	}
	return host
}

// Forges are the declared forges by Host.
type Forges map[string]Forge

// For is the forge that serves the repository of urls.
func (f Forges) For(urls []string) (Forge, string, bool) {
	for _, u := range urls {
		if h := Host(u); h != "" && f[h] != nil {
			return f[h], h, true
		}
	}
	return nil, "", false
}
