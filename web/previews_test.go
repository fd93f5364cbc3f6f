package web

import (
	"net/http"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/web/webtest"
)

// Head commits of the fake pull requests.
const (
	prHead12 = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	prHead7  = "1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e"
)

// hostileTitle is a pull request's title that must show as text.
const hostileTitle = `<script>alert("pwned")</script> & more`

// prFixtures are two open pull requests: acme/infra#12 on GitHub, with a
// succeeded, a failed, a running and a queued preview and a removed
// stack; and a Gitea fork's #7, whose manifests do not load, closed since.
func prFixtures(now time.Time) []review.PullRequest {
	return []review.PullRequest{
		{Key: "github:acme/infra#12", Forge: review.GitHub, Repo: "acme/infra", Number: 12, Title: hostileTitle, Author: "octocat",
			WebURL: "https://github.com/acme/infra/pull/12", BaseBranch: "main", HeadSHA: prHead12, UpdatedAt: now.Add(-5 * time.Minute),
			Previews: []review.Preview{
				{Stack: "web", Update: "web-4", Result: review.Succeeded, Changes: map[string]int{"create": 1, "update": 2, "replace": 1, "same": 9},
					Duration: 42 * time.Second, Denied: []review.Violation{{Policy: "stackd.files", Message: "deleting <b>x</b> is not allowed"}},
					Warnings: []review.Violation{{Policy: "stackd.review", Message: "by octocat"}}},
				{Stack: "db", Update: "db-8", Result: review.Failed, Duration: 3 * time.Second,
					Error: "error: <missing> required configuration key \"aws:region\""},
				{Stack: "queue", Update: "queue-1", Result: review.Running},
				{Stack: "cache", Result: review.Queued, New: true},
			},
			Removed: []string{"legacy"},
			ReviewStacks: []review.ReviewStack{{Name: "web-pr-12", Template: "web", PulumiStack: "acme/web/dev-pr-12", Op: review.Update,
				Result: review.Succeeded, Commit: prHead12, Outputs: map[string]string{"url": `"<http://web-pr-12>"`}, ExpiresAt: now.Add(time.Hour)}},
			ReviewRefused: []string{"Review stack `db-pr-12` not deployed: 20 review stacks exist, the maximum in all."}},
		{Key: "gitea:acme/infra#7", Forge: review.Gitea, Repo: "acme/infra", Number: 7, Title: "Move the queue",
			WebURL: "javascript:alert(1)", BaseBranch: "release", HeadSHA: prHead7, Fork: true, UpdatedAt: now.Add(-time.Hour), Closed: true,
			Error: "stacks.yaml:3:5: spec.stack is required"},
	}
}

// previewUIAPI is uiFakeAPI with previews of pull requests in web's
// history: web-4 previewed #12 and web-5 runs a preview of it; web-1
// stays a preview of no pull request.
type previewUIAPI struct {
	*uiFakeAPI
	previews []model.Update
	running  *livelog.Log
}

func newPreviewUIAPI() *previewUIAPI {
	f := &previewUIAPI{uiFakeAPI: newUIFakeAPI(), running: livelog.New()}
	_, _ = f.running.Write([]byte("Previewing update (prod)\n  ~ aws:s3:Bucket assets updating\n"))
	f.previews = []model.Update{
		{ID: "web-5", Stack: "web", Seq: 5, Type: model.UpdatePreview, Reason: "Pull request #12", PullRequest: 12, Commit: prHead12,
			StartTime: f.ago(10 * time.Second), State: model.UpdateRunning},
		{ID: "web-4", Stack: "web", Seq: 4, Type: model.UpdatePreview, Reason: "Pull request #12", PullRequest: 12, Commit: prHead12,
			StartTime: f.ago(time.Minute + 42*time.Second), EndTime: f.ago(time.Minute), State: model.UpdateSucceeded,
			Changes: map[string]int{"create": 1, "update": 2, "replace": 1, "same": 9}, Message: "warning: <deprecated> provider"},
	}
	return f
}

func (f *previewUIAPI) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	us, err := f.uiFakeAPI.Updates(stack, before, limit)
	if stack == "web" {
		us = append(append([]model.Update(nil), f.previews...), us...)
	}
	return us[:min(limit, len(us))], err
}

func (f *previewUIAPI) Update(id string) (model.Update, error) {
	for _, u := range f.previews {
		if u.ID == id {
			return u, nil
		}
	}
	return f.uiFakeAPI.Update(id)
}

func (f *previewUIAPI) Log(id string) ([]byte, *livelog.Log, error) {
	switch id {
	case "web-5":
		return nil, f.running, nil
	case "web-4":
		return []byte("Previewing update (prod)\n  + aws:s3:Bucket <assets> create\nResources: 1 to create\n"), nil, nil
	}
	return f.uiFakeAPI.Log(id)
}

// startPreviews serves api and previews on a loopback port.
func startPreviews(t *testing.T, api API, previews PreviewAPI) string {
	t.Helper()
	_, url := startWith(t, Options{API: api, Previews: previews})
	return url
}

func TestPreviewsAPI(t *testing.T) {
	url := startPreviews(t, &fakeAPI{}, &fakePreviews{prs: prFixtures(time.Now())})
	code, v := call(t, "GET", url+"/api/v1/previews")
	prs, ok := v["pullRequests"].([]any)
	if code != 200 || !ok || len(prs) != 2 {
		t.Fatalf("previews = %d %v", code, v)
	}
	first, second := prs[0].(map[string]any), prs[1].(map[string]any)
	if first["key"] != "github:acme/infra#12" || first["title"] != hostileTitle || len(first["previews"].([]any)) != 4 {
		t.Errorf("first pull request: %v", first)
	}
	if previews, ok := second["previews"].([]any); !ok || len(previews) != 0 {
		t.Errorf("a pull request without previews: %v", second["previews"])
	}
	for name, p := range map[string]PreviewAPI{"not configured": nil, "none open": &fakePreviews{}} {
		url := startPreviews(t, &fakeAPI{}, p)
		if code, v := call(t, "GET", url+"/api/v1/previews"); code != 200 || v["pullRequests"] == nil || len(v["pullRequests"].([]any)) != 0 {
			t.Errorf("%s: previews = %d %v, want an empty list", name, code, v)
		}
	}
}

// TestPreviewsAPIReadToken: the list is read like the other GET routes:
// open with a token unless reads require it.
func TestPreviewsAPIReadToken(t *testing.T) {
	previews := &fakePreviews{prs: prFixtures(time.Now())}
	_, open := startWith(t, Options{API: &fakeAPI{}, Previews: previews, Token: "t0ken"})
	if code, v := call(t, "GET", open+"/api/v1/previews"); code != 200 {
		t.Errorf("without ReadRequiresToken = %d %v", code, v)
	}
	_, closed := startWith(t, Options{API: &fakeAPI{}, Previews: previews, Token: "t0ken", ReadRequiresToken: true})
	if code, v := call(t, "GET", closed+"/api/v1/previews"); code != 401 {
		t.Errorf("with ReadRequiresToken, no token = %d %v", code, v)
	}
	if code, v := callWith(t, "GET", closed+"/api/v1/previews", http.Header{"Authorization": {"Bearer t0ken"}}, ""); code != 200 {
		t.Errorf("with ReadRequiresToken and the token = %d %v", code, v)
	}
	if resp, _ := fetch(t, "GET", closed+"/previews", nil); resp.StatusCode != 401 {
		t.Errorf("the page with ReadRequiresToken, no token: %d", resp.StatusCode)
	}
}

func TestUIPreviews(t *testing.T) {
	page := getPage(t, startPreviews(t, newUIFakeAPI(), &fakePreviews{prs: prFixtures(time.Now())})+"/previews", http.StatusOK)
	webtest.WantContains(t, page,
		`<a href="/previews" aria-current="page">Previews</a>`, "1 open pull request, 1 closing",
		// #12: forge, link, title (escaped), author, base, head.
		`<span class="tag">github</span> <a href="https://github.com/acme/infra/pull/12" rel="noopener noreferrer">acme/infra#12</a>`,
		`&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; &amp; more`, "<strong>octocat</strong>", `<code class="ref">main</code>`,
		`<code title="`+prHead12+`">6dcb09b</code>`, "5m ago",
		// Its previews.
		`<a href="/stacks/web">web</a>`, `state-succeeded">succeeded`, `<code title="create, update, delete, replace">&#43;1 ~2 -0 ±1</code>`, "42s",
		`<a href="/previews/web-4">preview</a>`,
		`<li>denied by policy <code>stackd.files</code>: deleting &lt;b&gt;x&lt;/b&gt; is not allowed</li>`,
		`<li>warning of policy <code>stackd.review</code>: by octocat</li>`,
		`state-failed">failed`, "error: &lt;missing&gt; required configuration key", "3s",
		`state-running">running`, `<a href="/previews/queue-1">preview</a>`,
		`cache <span class="tag">new</span>`, `state-queued">queued`,
		`would remove</span> <a href="/stacks/legacy">legacy</a>`,
		// Its review stack, and one refused.
		`<td>web-pr-12 <span class="muted">of</span> <a href="/stacks/web">web</a></td>`, `<code>acme/web/dev-pr-12</code>`,
		`update <span class="state state-succeeded">succeeded`, `<code>url</code>: <code>&#34;&lt;http://web-pr-12&gt;&#34;</code>`,
		"Review stack `db-pr-12` not deployed: 20 review stacks exist, the maximum in all.",
		// #7: a fork whose manifests do not load; its javascript: link is defused.
		`<span class="tag">gitea</span>`, "acme/infra#7", `title="The head branch lives in another repository">fork</span>`,
		`<span class="tag closed" title="Closed: listed until its review stacks are destroyed">closed</span>`,
		`<pre class="error">stacks.yaml:3:5: spec.stack is required</pre>`, `<code class="ref">release</code>`)
	webtest.WantLacks(t, page, "<script>alert", `href="javascript:`, `href="/stacks/cache"`, "The pull request changes no stack.")
	wantNav(t, page, "")
}

func TestUIPreviewsEmpty(t *testing.T) {
	page := getPage(t, startPreviews(t, newUIFakeAPI(), &fakePreviews{})+"/previews", http.StatusOK)
	webtest.WantContains(t, page, "No open pull requests.", "0 open pull requests")
	page = getPage(t, startPreviews(t, newUIFakeAPI(), nil)+"/previews", http.StatusOK)
	webtest.WantContains(t, page, "Pull-request previews are not configured (--forge).")
	// Every page links to the previews.
	webtest.WantContains(t, getPage(t, startUI(t, newUIFakeAPI())+"/", http.StatusOK), `<a href="/previews">Previews</a>`)
}

func TestUIPreview(t *testing.T) {
	base := startPreviews(t, newPreviewUIAPI(), &fakePreviews{prs: prFixtures(time.Now())})
	page := getPage(t, base+"/previews/web-4", http.StatusOK)
	webtest.WantContains(t, page,
		`<a href="/previews" aria-current="page">Previews</a>`, "<h1>Preview of #12 on web</h1>",
		`<a href="/stacks/web">web</a>`, `<a href="https://github.com/acme/infra/pull/12" rel="noopener noreferrer">acme/infra#12</a>`,
		`&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;`,
		`<code title="`+prHead12+`">6dcb09b</code>`, `state-succeeded">succeeded`, "&#43;1 ~2 -0 ±1", "1 create, 1 replace, 2 update, 9 same", "42s",
		`<pre class="error">warning: &lt;deprecated&gt; provider</pre>`,
		// The stored log, escaped.
		`<section id="log" class="card" data-live="web-4 succeeded">`, "&#43; aws:s3:Bucket &lt;assets&gt; create", `href="/api/v1/updates/web-4/log"`)
	webtest.WantLacks(t, page, "<script>alert", "data-follow", "data-refresh")

	// A running preview's log is followed; its pull request is no longer
	// listed with it here.
	page = getPage(t, base+"/previews/web-5", http.StatusOK)
	webtest.WantContains(t, page, `data-follow="/api/v1/updates/web-5/log?follow=1"`, "aws:s3:Bucket assets updating", "data-refresh",
		"#12 <span class=\"muted\">(no longer open at this commit)</span>")

	// Any other update, or none, is not a preview page.
	for _, id := range []string{"web-2", "web-1", "nope-1"} {
		page := getPage(t, base+"/previews/"+id, http.StatusNotFound)
		webtest.WantContains(t, page, "There is no preview of a pull request with the ID &#34;"+id+"&#34;.")
	}
}

// TestUIStackPagePreviews: a stack's history tells previews of pull
// requests apart and links to them.
func TestUIStackPagePreviews(t *testing.T) {
	page := getPage(t, startPreviews(t, newPreviewUIAPI(), &fakePreviews{})+"/stacks/web", http.StatusOK)
	webtest.WantContains(t, page, `<a class="pr-preview" href="/previews/web-4">preview of #12</a>`,
		`<a class="pr-preview" href="/previews/web-5">preview of #12</a>`, "<td>preview</td>")
}
