package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/forge/forgetest"
)

// Secret canaries of the previewed stack: its config and its env.
const (
	canaryConfig = "cfg-CANARY-51d2e8"
	canaryEnv    = "env-CANARY-7c03aa"
	prHookSecret = "pr-hook-secret"
	forgeToken   = "forge-token-SENTINEL-0b1d"
)

// forgeRig is a fake forge that also serves the test's repositories over
// smart HTTP, so that their URLs have the forge's host, and a daemon that
// reports to it.
type forgeRig struct {
	t     testing.TB
	kind  review.Kind
	forge *forgetest.Server
	root  string // the served repositories
	in    *instance
}

func newForgeRig(t testing.TB, kind review.Kind) *forgeRig {
	t.Helper()
	g := &forgeRig{t: t, kind: kind, forge: forgetest.New(t, kind, forgeToken), root: t.TempDir()}
	g.forge.Handle("/git/", http.StripPrefix("/git", gitBackend(t, g.root)))
	return g
}

// repo makes a repository served as <forge>/git/<name>/.git.
func (g *forgeRig) repo(name string) *repo {
	r := &repo{t: g.t, dir: filepath.Join(g.root, name)}
	r.git("init", "-q", "-b", "main", r.dir)
	return r
}

func (g *forgeRig) url(name string) string { return g.forge.URL() + "/git/" + name + "/.git" }

// start starts the daemon with config, reporting to the fake forge.
func (g *forgeRig) start(config string, tweak func(*runFlags)) {
	dir := g.t.TempDir()
	tokenFile, hookFile := filepath.Join(dir, "token"), filepath.Join(dir, "hook")
	for file, v := range map[string]string{tokenFile: forgeToken, hookFile: prHookSecret} {
		if err := os.WriteFile(file, []byte(v+"\n"), 0o600); err != nil {
			g.t.Fatal(err)
		}
	}
	g.in = startDaemonWith(g.t, config, "", func(f *runFlags) {
		f.forges = stringsFlag{string(g.kind) + "=" + g.forge.URL()}
		f.tokenFiles = stringsFlag{g.forge.URL() + "=" + tokenFile}
		f.webhookFile, f.externalURL = hookFile, "http://stackd.example:8080"
		if tweak != nil {
			tweak(f)
		}
	})
}

// pullRequest is one pull request of the rig's forge.
type pullRequest struct {
	repo   string // "acme/<name>"
	name   string // the repository's directory
	number int
	head   string
	fork   bool
	// author opened the pull request, actor triggers its events; zero
	// means alice, and the author.
	author, actor forgetest.User
	// delivery, when nonzero, makes its events deliveries of their own
	// (another delivery id, another title): webhooks that repeat the head
	// commit, not replays.
	delivery int
}

// alice is the default author of pull requests.
var alice = forgetest.User{ID: 7, Username: "alice"}

// people returns pr's author and the user who triggers its events.
func (pr *pullRequest) people() (author, actor forgetest.User) {
	author, actor = pr.author, pr.actor
	if author == (forgetest.User{}) {
		author = alice
	}
	if actor == (forgetest.User{}) {
		actor = author
	}
	return author, actor
}

// push makes commit the pull request's head (refs/pull/N/head, or
// refs/merge-requests/N/head on GitLab) in the served repository,
// without touching main, and sets its changed files and its head on the
// forge (the pull request is open), without a webhook.
func (g *forgeRig) push(r *repo, pr *pullRequest, files map[string]string) {
	g.t.Helper()
	r.git("checkout", "-q", "-B", "pr", "main")
	pr.head = r.commit(files)
	r.git("checkout", "-q", "main")
	ev := review.Event{Forge: g.kind, Number: pr.number}
	r.git("update-ref", ev.HeadRef(), pr.head)
	var changed []string
	for f := range files {
		changed = append(changed, f)
	}
	g.forge.SetFiles(pr.repo, pr.number, changed)
	author, _ := pr.people()
	g.forge.SetAuthor(pr.repo, pr.number, author)
	g.forge.SetPullRequest(pr.repo, pr.number, forgetest.PullRequest{Head: pr.head})
}

// hook posts the pull-request webhook of action and returns the answer;
// a closing closes the pull request on the forge first, as the forge
// does before it sends the event.
func (g *forgeRig) hook(pr *pullRequest, action string) review.Accepted {
	g.t.Helper()
	if action == "closed" {
		g.forge.SetPullRequest(pr.repo, pr.number, forgetest.PullRequest{Head: pr.head, Closed: true})
	}
	body, headers := prWebhook(g.kind, action, pr, g.url(pr.name), g.forge.URL())
	var acc review.Accepted
	code, raw := g.in.postJSON("/api/v1/webhooks/git", body, headers, &acc)
	if code != http.StatusAccepted {
		g.t.Fatalf("pull-request webhook: %d %s", code, raw)
	}
	return acc
}

// prWebhook is a pull-request event as the forge documents it, signed.
func prWebhook(kind review.Kind, action string, pr *pullRequest, cloneURL, web string) ([]byte, map[string]string) {
	head := map[string]any{"sha": pr.head, "ref": "feature", "repo": map[string]any{"full_name": pr.repo}}
	if pr.fork {
		head["repo"] = map[string]any{"full_name": "mallory/" + pr.name}
	}
	repository := map[string]any{"full_name": pr.repo, "clone_url": cloneURL, "html_url": web + "/" + pr.repo}
	var payload map[string]any
	headers := map[string]string{"Content-Type": "application/json"}
	author, actor := pr.people()
	title, id := "Change things", fmt.Sprintf("%s-%d-%s", action, pr.number, pr.head)
	if pr.delivery != 0 {
		title, id = fmt.Sprintf("%s (%d)", title, pr.delivery), fmt.Sprintf("%s-%d", id, pr.delivery)
	}
	switch kind {
	case review.GitLab:
		action = map[string]string{"opened": "open", "synchronize": "update", "closed": "close"}[action]
		srcProject := 7
		if pr.fork {
			srcProject = 99
		}
		payload = map[string]any{"object_kind": "merge_request", "user": map[string]any{"id": actor.ID, "username": actor.Username},
			"project": map[string]any{"id": 7, "path_with_namespace": pr.repo, "git_http_url": cloneURL, "web_url": web + "/" + pr.repo},
			"object_attributes": map[string]any{"iid": pr.number, "action": action, "source_branch": "feature", "target_branch": "main",
				"source_project_id": srcProject, "target_project_id": 7, "author_id": author.ID, "title": title, "url": web + "/" + pr.repo + "/-/merge_requests/1",
				"last_commit": map[string]any{"id": pr.head}, "oldrev": strings.Repeat("0", 40)}}
		headers["X-Gitlab-Event"], headers["X-Gitlab-Token"] = "Merge Request Hook", prHookSecret
		headers["X-Gitlab-Event-UUID"] = id
	default:
		payload = map[string]any{"action": action, "number": pr.number, "repository": repository,
			"pull_request": map[string]any{"number": pr.number, "title": title, "html_url": web + "/" + pr.repo + "/pull/1",
				"user": map[string]any{"login": author.Username}, "head": head,
				"base": map[string]any{"ref": "main", "sha": strings.Repeat("b", 40), "repo": map[string]any{"full_name": pr.repo}}}}
		event, sig, delivery := "X-GitHub-Event", "X-Hub-Signature-256", "X-GitHub-Delivery"
		if kind == review.Gitea {
			event, sig, delivery = "X-Gitea-Event", "X-Gitea-Signature", "X-Gitea-Delivery"
		}
		headers[event], headers[delivery] = "pull_request", id
		body, _ := json.Marshal(payload)
		mac := hmac.New(sha256.New, []byte(prHookSecret))
		mac.Write(body)
		headers[sig] = hex.EncodeToString(mac.Sum(nil))
		if kind == review.GitHub {
			headers[sig] = "sha256=" + headers[sig]
		}
		return body, headers
	}
	body, _ := json.Marshal(payload)
	return body, headers
}

// waitStatus waits until the status of context on pr's head is final.
func (g *forgeRig) waitStatus(pr *pullRequest, context string) review.Status {
	g.t.Helper()
	var last review.Status
	g.wait("status "+context+" of "+pr.head[:8], func() bool {
		for _, st := range g.forge.Statuses(pr.repo, pr.head) {
			if st.Context == context {
				last = st
			}
		}
		return last.State == review.Success || last.State == review.Failure
	})
	return last
}

// waitComment waits until pr's one comment is about its head commit.
func (g *forgeRig) waitComment(pr *pullRequest) forgetest.Comment {
	g.t.Helper()
	var c forgetest.Comment
	g.wait("the comment on "+pr.head[:8], func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		if len(cs) > 1 {
			g.t.Fatalf("%d comments on the pull request, want one", len(cs))
		}
		if len(cs) == 1 && strings.Contains(cs[0].Body, pr.head[:12]) {
			c = cs[0]
			return true
		}
		return false
	})
	return c
}

func (g *forgeRig) wait(what string, cond func() bool) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := g.forge.WaitFor(ctx, cond); err != nil {
		g.t.Fatalf("waiting for %s: %v\n%s", what, err, g.in.logs)
	}
}

// noLeaks fails if a canary or the token of the forge reached a request
// body sent to the forge, or the token a header other than its own.
func (g *forgeRig) noLeaks(canaries ...string) {
	g.t.Helper()
	for _, req := range g.forge.Requests() {
		for _, c := range canaries {
			if strings.Contains(req.Body, c) || strings.Contains(req.Path, c) {
				g.t.Errorf("%s %s carries the secret %q:\n%s", req.Method, req.Path, c, req.Body)
			}
		}
	}
}

// previewStack is the stack the rig previews: its program in app/ of the
// programs repository, a secret canary in its config and one in its env.
func (g *forgeRig) previewStack(name, url, outDir string) string {
	return manifest(name, url, outDir, "hello") + fmt.Sprintf(`    secrets:
      token: %s
    envRefs:
      STACKD_TEST_API_KEY:
        type: Literal
        literal:
          value: %s
`, canaryConfig, canaryEnv)
}

// TestE2EPullRequestPreviewGitHub is the acceptance of previews on GitHub
// (Enterprise, by base URL): a pull request that changes the program
// gets pending then success statuses and one comment with the right
// counts, a second push edits that comment, a broken program fails with
// its error, and nothing of the stack changes; a pull request that
// touches no tracked file, or comes from a fork, runs nothing; no secret
// reaches the forge.
func TestE2EPullRequestPreviewGitHub(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	v1 := programs.commit(map[string]string{"app/Pulumi.yaml": program("v1"), "docs/README.md": "docs\n"})
	out := outDir(t)
	g.start(g.previewStack("app", g.url("infra"), out), nil)
	before := g.in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 1}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
	acc := g.hook(pr, "opened")
	if acc.Ignored != "" {
		t.Fatalf("pull request ignored: %s", acc.Ignored)
	}
	st := g.waitStatus(pr, "stackd/app")
	c := g.waitComment(pr)
	statuses := g.forge.Statuses(pr.repo, pr.head)
	if statuses[0].State != review.Pending || st.State != review.Success {
		t.Errorf("statuses %+v: want pending, then success", statuses)
	}
	if !strings.HasPrefix(st.TargetURL, "http://stackd.example:8080/previews/app-") {
		t.Errorf("status links to %q, want the preview's page", st.TargetURL)
	}
	if !strings.Contains(c.Body, "| 0 | 1 | 0 | 0 |") || !strings.Contains(c.Body, "✅ succeeded") {
		t.Errorf("comment does not show one update:\n%s", c.Body)
	}
	g.stackUntouched("app", before, out, "hello v1")
	t.Logf("the comment:\n%s", c.Body)

	// A second push edits the same comment and supersedes the preview.
	first := pr.head
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v3")})
	g.hook(pr, "synchronize")
	g.waitStatus(pr, "stackd/app")
	c = g.waitComment(pr)
	if c.Edits < 1 || strings.Contains(c.Body, first[:12]) {
		t.Errorf("second push: comment edited %d times, body:\n%s", c.Edits, c.Body)
	}

	// A broken program: a failure status and the program's error.
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": strings.Replace(program("v4"), "${path}", "${nowhere}", 1)})
	g.hook(pr, "synchronize")
	if st := g.waitStatus(pr, "stackd/app"); st.State != review.Failure {
		t.Errorf("broken program: status %+v", st)
	}
	c = g.waitComment(pr)
	if !strings.Contains(c.Body, "❌ failed") || !strings.Contains(c.Body, "nowhere") {
		t.Errorf("broken program: the comment lacks the failure or the error:\n%s", c.Body)
	}
	g.stackUntouched("app", before, out, "hello v1")
	g.checkHistory("app", 1)

	// A pull request that touches no tracked file, and one from a fork.
	docs := &pullRequest{repo: "acme/infra", name: "infra", number: 2}
	g.push(programs, docs, map[string]string{"docs/README.md": "more docs\n"})
	g.hook(docs, "opened")
	fork := &pullRequest{repo: "acme/infra", name: "infra", number: 3, fork: true}
	g.push(programs, fork, map[string]string{"app/Pulumi.yaml": program("fork")})
	if acc := g.hook(fork, "opened"); !strings.Contains(acc.Ignored, "fork") {
		t.Errorf("a fork's pull request: %+v, want it ignored", acc)
	}
	g.wait("the docs pull request judged", func() bool {
		return strings.Contains(g.in.logs.String(), "pull request changes no stack's files")
	})
	for _, p := range []*pullRequest{docs, fork} {
		if s, c := g.forge.Statuses(p.repo, p.head), g.forge.Comments(p.repo, p.number); len(s)+len(c) > 0 {
			t.Errorf("pull request #%d: statuses %+v, comments %d; want none", p.number, s, len(c))
		}
	}
	g.noLeaks(canaryConfig, canaryEnv, forgeToken)
	g.checkPreviewsAPI(pr)
}

// stackUntouched checks that the previews changed nothing of the stack:
// its status, its resource on disk.
func (g *forgeRig) stackUntouched(name string, before model.StackView, out, content string) {
	g.t.Helper()
	v := g.in.stack(name)
	if !isReady(v) || v.Status.LastUpdate.Name != before.Status.LastUpdate.Name || v.Status.LastUpdate.LastSuccessfulCommit != before.Status.LastUpdate.LastSuccessfulCommit {
		g.t.Errorf("stack %s changed: %+v, was %+v", name, v.Status.LastUpdate, before.Status.LastUpdate)
	}
	if got := readFile(g.t, filepath.Join(out, name+".txt")); got != content {
		g.t.Errorf("the stack's resource holds %q, want %q", got, content)
	}
}

// checkHistory checks that the stack's history records previews of pull
// request number, and that their logs hold no secret.
func (g *forgeRig) checkHistory(name string, number int) {
	g.t.Helper()
	var res struct {
		Updates []model.Update `json:"updates"`
	}
	g.in.get("/api/v1/stacks/"+name+"/updates", &res)
	ups := res.Updates
	n := 0
	for _, u := range ups {
		if u.Type != model.UpdatePreview || u.PullRequest != number {
			continue
		}
		n++
		_, log := g.in.get("/api/v1/updates/"+u.ID+"/log", nil)
		for _, c := range []string{canaryConfig, canaryEnv} {
			if strings.Contains(string(log), c) {
				g.t.Errorf("the log of %s shows %q", u.ID, c)
			}
		}
	}
	if n < 2 {
		g.t.Errorf("history of %s: %d previews of #%d, want at least 2: %+v", name, n, number, ups)
	}
}

// checkPreviewsAPI checks that the API lists the pull request.
func (g *forgeRig) checkPreviewsAPI(pr *pullRequest) {
	g.t.Helper()
	var res struct {
		PullRequests []review.PullRequest `json:"pullRequests"`
	}
	g.in.get("/api/v1/previews", &res)
	for _, p := range res.PullRequests {
		if p.Number == pr.number && p.HeadSHA == pr.head && len(p.Previews) == 1 && p.Previews[0].Result == review.Failed {
			return
		}
	}
	g.t.Errorf("GET /api/v1/previews does not list #%d at %s with its failed preview: %+v", pr.number, pr.head, res.PullRequests)
}

// postJSON posts body and decodes a 2xx answer into v.
func (in *instance) postJSON(path string, body []byte, headers map[string]string, v any) (int, []byte) {
	in.t.Helper()
	return postJSONTo(in.t, in.url+path, body, headers, v)
}

// postJSONTo posts body to url and decodes a 2xx answer into v.
func postJSONTo(t testing.TB, url string, body []byte, headers map[string]string, v any) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, val := range headers {
		req.Header.Set(k, val)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 && v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("POST %s: %v\n%s", url, err, raw)
		}
	}
	return resp.StatusCode, raw
}
