package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/forge/forgetest"
)

// TestE2EPullRequestPreviewGitLabAuthor: with --preview-author, a GitLab
// merge request is judged by its author, whom the forge's API tells when
// the webhook was triggered by someone else, never by that someone. An
// allowed user pushing to another's merge request gets no preview; an
// unlisted user pushing to an allowed author's merge request does not
// stop its preview.
func TestE2EPullRequestPreviewGitLabAuthor(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitLab)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := outDir(t)
	g.start(g.previewStack("app", g.url("infra"), out), func(f *runFlags) { f.authors = stringsFlag{alice.Username} })
	g.in.waitStack("app", "first deploy", 2*time.Minute, isReady)
	mallory := forgetest.User{ID: 51, Username: "mallory"}

	// mallory's own merge request: the payload names her; refused at once.
	own := &pullRequest{repo: "acme/infra", name: "infra", number: 1, author: mallory}
	g.push(programs, own, map[string]string{"app/Pulumi.yaml": program("mallory")})
	if acc := g.hook(own, "opened"); !strings.Contains(acc.Ignored, "--preview-author") {
		t.Errorf("mallory's merge request: %+v, want it refused", acc)
	}

	// alice pushes to mallory's merge request: the payload names alice as
	// the user; the author is asked for, and is not allowed.
	pushed := &pullRequest{repo: "acme/infra", name: "infra", number: 2, author: mallory, actor: alice}
	g.push(programs, pushed, map[string]string{"app/Pulumi.yaml": program("mallory-2")})
	if acc := g.hook(pushed, "synchronize"); acc.Ignored != "" {
		t.Fatalf("the event waits for the author, got %+v", acc)
	}
	g.wait("merge request !2 refused", func() bool {
		return strings.Contains(g.in.logs.String(), "pullRequest=gitlab:acme/infra#2 why=\"the pull request's author is not in --preview-author\"")
	})

	// mallory pushes to alice's merge request: alice is the author.
	helped := &pullRequest{repo: "acme/infra", name: "infra", number: 3, actor: mallory}
	g.push(programs, helped, map[string]string{"app/Pulumi.yaml": program("v2")})
	if acc := g.hook(helped, "synchronize"); acc.Ignored != "" {
		t.Fatalf("alice's merge request: %+v", acc)
	}
	if st := g.waitStatus(helped, "stackd/app"); st.State != review.Success {
		t.Errorf("alice's merge request: status %+v", st)
	}
	g.waitComment(helped)

	for _, pr := range []*pullRequest{own, pushed} {
		if s, c := g.forge.Statuses(pr.repo, pr.head), g.forge.Comments(pr.repo, pr.number); len(s)+len(c) > 0 {
			t.Errorf("merge request !%d: statuses %+v, comments %d; want none", pr.number, s, len(c))
		}
	}
	asked := map[string]int{}
	for _, req := range g.forge.Requests() {
		if req.Method == "GET" && strings.Contains(req.Path, "/merge_requests/") && !strings.HasSuffix(req.Path, "/diffs") &&
			!strings.HasSuffix(req.Path, "/notes") {
			asked[req.Path[strings.LastIndexByte(req.Path, '/')+1:]]++
		}
	}
	if asked["1"] != 0 || asked["2"] != 1 || asked["3"] != 1 {
		t.Errorf("merge requests asked for their author: %v, want !2 and !3 once each", asked)
	}
	var res struct {
		PullRequests []review.PullRequest `json:"pullRequests"`
	}
	g.in.get("/api/v1/previews", &res)
	if len(res.PullRequests) != 1 || res.PullRequests[0].Number != 3 || res.PullRequests[0].Author != alice.Username {
		t.Errorf("GET /api/v1/previews = %+v, want only !3, by alice", res.PullRequests)
	}
}
