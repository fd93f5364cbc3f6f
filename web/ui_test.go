package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/web/webtest"
)

// Literal values in the fake spec; the daemon redacts them, and no page
// may show them.
const (
	uiSecretEnv    = "hunter2-env-literal"
	uiSecretConfig = "hunter2-config-secret"
)

// uiFakeAPI is a daemon with three stacks: "web", healthy and running
// update web-3; "db", degraded after failures; and "queue", never run.
// The shared fakeAPI serves the stacks, syncs, reloads and pushes; this
// type adds web's history and live log.
type uiFakeAPI struct {
	*fakeAPI
	live *livelog.Log
	now  time.Time
}

func newUIFakeAPI() *uiFakeAPI {
	live := livelog.New()
	_, _ = live.Write([]byte("Updating (prod)\n  + aws:s3:Bucket assets creating\n"))
	f := &uiFakeAPI{live: live, now: time.Now()}
	f.fakeAPI = &fakeAPI{
		stacks:    []model.StackView{f.web(), f.db(), f.queue()},
		config:    f.configStatus(),
		stats:     model.Stats{Running: 1},
		revisions: f.configRevisions(),
	}
	return f
}

// Config sources of uiFakeAPI.
const (
	uiWebSource   = "git+https://github.com/acme/web.git//deploy?ref=main"
	uiDBSource    = "git+git@github.com:acme/db.git"
	uiLocalSource = "/etc/stackd/stacks.yaml"
	uiCommitA     = "aaaaaaaaaaaa1111111111111111111111111111"
	uiCommitB     = "bbbbbbbbbbbb2222222222222222222222222222"
)

// configStatus has three sources: web's, progressing to a new commit; db's,
// whose latest commit is refused; and a local file.
func (f *uiFakeAPI) configStatus() model.ConfigStatus {
	return model.ConfigStatus{Successful: true, LastSuccess: f.ago(10 * time.Minute), LastAttempt: f.ago(10 * time.Minute),
		Health: &model.Health{Status: model.HealthDegraded, Message: "a source is degraded"},
		Sources: []model.SourceStatus{
			{Source: uiWebSource, Git: &spec.GitDir{URL: "https://github.com/acme/web.git", Path: "deploy", Ref: "main"},
				Commit: uiCommitA, LatestCommit: uiCommitA, LastPoll: f.ago(30 * time.Second), AppliedAt: f.ago(10 * time.Minute),
				Stacks: 1, Health: model.Health{Status: model.HealthProgressing, Message: "New commit detected"}},
			{Source: uiDBSource, Git: &spec.GitDir{URL: "git@github.com:acme/db.git"},
				Commit: uiCommitA, LatestCommit: uiCommitB, LastPoll: f.ago(40 * time.Second), AppliedAt: f.ago(2 * time.Hour),
				Error: "db.yaml:3:5: spec.stack is required\n<script>alert(1)</script>", Stacks: 1,
				Health: model.Health{Status: model.HealthDegraded, Message: "config not valid"}},
			{Source: uiLocalSource, AppliedAt: f.ago(3 * time.Hour), Stacks: 1, Health: model.Health{Status: model.HealthHealthy}},
		},
	}
}

// configRevisions are, newest first: db's commit B refused, commit A applied,
// and the first load.
func (f *uiFakeAPI) configRevisions() []model.ConfigRevision {
	return []model.ConfigRevision{
		{Seq: 3, Time: f.ago(40 * time.Second), Trigger: "git", Error: "config not applied: db.yaml:3:5: spec.stack is required",
			Sources: []model.RevisionSource{{Source: uiWebSource, Commit: uiCommitA}, {Source: uiDBSource, Commit: uiCommitB}, {Source: uiLocalSource}}},
		{Seq: 2, Time: f.ago(10 * time.Minute), Trigger: "git", Applied: true, Changed: []string{"web"}, Removed: []string{"old <app>"},
			Sources: []model.RevisionSource{{Source: uiWebSource, Commit: uiCommitA}, {Source: uiDBSource, Commit: uiCommitA}, {Source: uiLocalSource}}},
		{Seq: 1, Time: f.ago(3 * time.Hour), Trigger: "start", Applied: true, Added: []string{"web", "db", "queue"},
			Sources: []model.RevisionSource{{Source: uiWebSource, Commit: uiCommitB}, {Source: uiDBSource, Commit: uiCommitA}, {Source: uiLocalSource}}},
	}
}

func (f *uiFakeAPI) ago(d time.Duration) time.Time { return f.now.Add(-d) }

func (f *uiFakeAPI) web() model.StackView {
	stackSpec := &spec.StackSpec{
		Stack:       "acme/web/prod",
		ProjectRepo: "https://github.com/acme/web.git",
		Branch:      "main",
		EnvRefs: map[string]spec.ResourceRef{
			"API_KEY": {Type: spec.RefLiteral, Literal: &spec.LiteralRef{Value: uiSecretEnv}},
		},
		Secrets: map[string]string{"dbPassword": uiSecretConfig},
		Config:  map[string]any{"aws:region": "eu-west-1"},
	}
	return model.StackView{
		Name:         "web",
		Spec:         spec.Redacted(stackSpec),
		ExternalLink: "https://console.example.com/stacks/web?env=prod&tab=1",
		LastSuccess:  f.ago(2 * time.Hour),
		Tracking:     "https://github.com/acme/web.git@main",
		Source:       uiWebSource,
		Status: model.StackStatus{
			Conditions: []model.Condition{
				{Type: model.ConditionReady, Status: "False", Reason: "NotReady", Message: "An update is in progress", LastTransitionTime: f.ago(time.Minute)},
				{Type: model.ConditionReconciling, Status: "True", Reason: "StackProcessing", Message: "New commit detected", LastTransitionTime: f.ago(time.Minute)},
			},
			Outputs: map[string]json.RawMessage{
				"url":        json.RawMessage(`"https://web.example.com"`),
				"dbPassword": json.RawMessage(`"[secret]"`),
				"ports":      json.RawMessage(`[80,443]`),
				"banner":     json.RawMessage(`"<b>hello</b>"`),
			},
			CurrentUpdate: &model.CurrentUpdate{Name: "web-3", Commit: "0123456789abcdef0123456789abcdef01234567"},
			LastUpdate: &model.LastUpdate{
				Name: "web-2", Type: model.UpdateUp, State: model.UpdateSucceeded,
				LastSuccessfulCommit: "89abcdef0123456789abcdef0123456789abcdef", LastResyncTime: f.ago(2 * time.Hour),
			},
			Health: &model.Health{Status: model.HealthProgressing, Message: "New commit detected"},
			SkippedCommit: &model.SkippedCommit{Commit: "76543210fedcba9876543210fedcba9876543210",
				Reason: "changes no file of paths [deploy/** <shared>/**]", Time: f.ago(30 * time.Minute)},
		},
	}
}

func (f *uiFakeAPI) db() model.StackView {
	return model.StackView{
		Name:     "db",
		Spec:     map[string]any{"stack": "acme/db/prod", "projectRepo": "git@github.com:acme/db.git", "commit": "fedcba9876543210fedcba9876543210fedcba98"},
		Tracking: "git@github.com:acme/db.git@fedcba9876543210fedcba9876543210fedcba98",
		Source:   uiDBSource,
		Status: model.StackStatus{
			Conditions: []model.Condition{
				{Type: model.ConditionStalled, Status: "True", Reason: "UpdateFailed", Message: "up failed 3 times; not retrying", LastTransitionTime: f.ago(26 * time.Hour)},
			},
			LastUpdate: &model.LastUpdate{
				Name: "db-7", Type: model.UpdateUp, State: model.UpdateFailed, Message: "exit status 255",
				LastSuccessfulCommit: "aaaabbbbccccddddeeeeffff0000111122223333", LastResyncTime: f.ago(26 * time.Hour), Failures: 3,
			},
			Health: &model.Health{Status: model.HealthDegraded, Message: "up failed 3 times; not retrying"},
		},
	}
}

func (f *uiFakeAPI) queue() model.StackView {
	return model.StackView{Name: "queue", Spec: map[string]any{"stack": "dev"}, Tracking: "program queue"}
}

func (f *uiFakeAPI) syncs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.synced...)
}

func (f *uiFakeAPI) Updates(stack string, _ uint64, limit int) ([]model.Update, error) {
	if stack != "web" {
		if _, err := f.Stack(stack); err != nil {
			return nil, err
		}
		return nil, nil
	}
	us := []model.Update{
		{ID: "web-3", Stack: "web", Seq: 3, Type: model.UpdateUp, Reason: "New commit detected",
			Commit: "0123456789abcdef0123456789abcdef01234567", StartTime: f.ago(time.Minute), State: model.UpdateRunning},
		{ID: "web-2", Stack: "web", Seq: 2, Type: model.UpdateUp, Reason: "Resync", Commit: "89abcdef0123456789abcdef0123456789abcdef",
			StartTime: f.ago(2*time.Hour + 40*time.Second), EndTime: f.ago(2 * time.Hour), State: model.UpdateSucceeded,
			Changes: map[string]int{"same": 12, "update": 1}, Permalink: "https://app.pulumi.com/acme/web/prod/updates/2"},
		{ID: "web-1", Stack: "web", Seq: 1, Type: model.UpdatePreview, Reason: "First run", Commit: "89abcdef0123456789abcdef0123456789abcdef",
			StartTime: f.ago(3 * time.Hour), EndTime: f.ago(3*time.Hour - 5*time.Second), State: model.UpdateFailed,
			Message: "error: missing required configuration key \"aws:region\""},
	}
	return us[:min(limit, len(us))], nil
}

func (f *uiFakeAPI) Update(id string) (model.Update, error) {
	us, _ := f.Updates("web", 0, 100)
	for _, u := range us {
		if u.ID == id {
			return u, nil
		}
	}
	return model.Update{}, daemon.ErrUnknownUpdate
}

func (f *uiFakeAPI) Log(id string) ([]byte, *livelog.Log, error) {
	if id == "web-3" {
		return nil, f.live, nil
	}
	if _, err := f.Update(id); err != nil {
		return nil, nil, err
	}
	return []byte("stored log of " + id + "\n"), nil, nil
}

// startUI serves api on a loopback port and returns its base URL.
func startUI(t *testing.T, api API) string {
	t.Helper()
	s := New(Options{Addr: "127.0.0.1:0", API: api})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return "http://" + s.Addr()
}

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       10 * time.Second,
}

// fetch does a request and returns the response and its body.
func fetch(t *testing.T, method, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// getPage fetches an HTML page and checks its status and headers.
func getPage(t *testing.T, url string, code int) string {
	t.Helper()
	resp, body := fetch(t, http.MethodGet, url, nil)
	if resp.StatusCode != code {
		t.Fatalf("GET %s: status %d, want %d\n%s", url, resp.StatusCode, code, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q", url, ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("GET %s: Content-Security-Policy %q", url, csp)
	}
	return body
}

// assetRefs matches the src and href attributes of the page's own assets.
var assetRefs = regexp.MustCompile(`<(?:script|link)[^>]*(?:src|href)="([^"]*)"`)

func TestUIList(t *testing.T) {
	page := getPage(t, startUI(t, newUIFakeAPI())+"/", http.StatusOK)
	webtest.WantContains(t, page,
		`href="/stacks/web"`, `href="/stacks/db"`, `href="/stacks/queue"`,
		`class="badge health-progressing" title="New commit detected">Progressing</span>`,
		`class="badge health-degraded" title="up failed 3 times; not retrying">Degraded</span>`,
		// The condition behind a health, in the words of the docs.
		`<div class="sub" title="up failed 3 times; not retrying">Stalled/UpdateFailed</div>`,
		`class="badge health-unknown" title="">Unknown</span>`,
		`state-running">running`, `<code>web-3</code>`, `state-failed">failed`,
		"github.com/acme/web", `<code class="ref">main</code>`, `<code class="ref">fedcba9</code>`, "program queue",
		`title="89abcdef0123456789abcdef0123456789abcdef">89abcde</code>`,
		`action="/stacks/db/sync"`, "1 running · 0 queued",
		// The config's health, unobtrusively, linking to its page.
		`<a href="/config">Config</a>: <span class="badge health-degraded" title="a source is degraded">Degraded</span>`,
		"3 sources", "· last applied <time")
	wantNav(t, page, "/")
	for _, m := range assetRefs.FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "/static/") {
			t.Errorf("asset %q is not served by stackd", m[1])
		}
	}
}

func TestUIStackPage(t *testing.T) {
	page := getPage(t, startUI(t, newUIFakeAPI())+"/stacks/web", http.StatusOK)
	webtest.WantContains(t, page,
		// Outputs, escaped, with secrets shown as such.
		"https://web.example.com", `<span class="secret">[secret]</span>`, "&lt;b&gt;hello&lt;/b&gt;", "80,",
		// Conditions with reasons and messages.
		"Reconciling", "StackProcessing", "New commit detected", "NotReady",
		// History, newest first.
		"<code>web-3</code>", "<code>web-2</code>", "1 update, 12 same", "First run", "missing required configuration key",
		"https://app.pulumi.com/acme/web/prod/updates/2",
		// The external link, escaped.
		`href="https://console.example.com/stacks/web?env=prod&amp;tab=1"`,
		// The live log, followed by the script.
		`data-follow="/api/v1/updates/web-3/log?follow=1"`, "aws:s3:Bucket assets creating",
		// The spec as YAML, redacted.
		"stack: acme/web/prod", "branch: main", "aws:region: eu-west-1", "value: &#39;[secret]&#39;", "dbPassword: &#39;[secret]&#39;",
		`action="/stacks/web/sync"`,
		// The source that defines the stack.
		`<code>git&#43;https://github.com/acme/web.git//deploy?ref=main</code>`,
		// A commit that changed nothing under the stack's paths, escaped.
		"Skipped commit", `<code title="76543210fedcba9876543210fedcba9876543210">7654321</code>`,
		"changes no file of paths [deploy/** &lt;shared&gt;/**]: nothing ran")
	wantNav(t, page, "/")
	webtest.WantLacks(t, page, uiSecretEnv, uiSecretConfig, "<b>hello</b>")
	if i, j := strings.Index(page, "<code>web-3</code>"), strings.Index(page, "<code>web-1</code>"); i < 0 || j < i {
		t.Error("history is not newest first")
	}
}

// wantNav checks the header's navigation: a link to each section, the
// one at current marked as the page's.
func wantNav(t *testing.T, page, current string) {
	t.Helper()
	for _, href := range []string{"/", "/config"} {
		link := `<a href="` + href + `">`
		if href == current {
			link = `<a href="` + href + `" aria-current="page">`
		}
		if !strings.Contains(page, link) {
			t.Errorf("the navigation lacks %s", link)
		}
	}
}

func TestUIConfig(t *testing.T) {
	page := getPage(t, startUI(t, newUIFakeAPI())+"/config", http.StatusOK)
	wantNav(t, page, "/config")
	webtest.WantContains(t, page,
		// The overall health.
		`<span class="badge health-degraded" title="a source is degraded">Degraded</span> <span class="message">a source is degraded</span>`,
		// Each source, with its ref, commits (the latest when it differs), stacks and health.
		`<code class="source-name">git&#43;https://github.com/acme/web.git//deploy?ref=main</code>`,
		`<code class="ref" title="main">main</code>`, "default branch", `<span class="muted">local</span>`,
		`<code title="`+uiCommitA+`">aaaaaaaaaaaa</code> → <code title="`+uiCommitB+`">bbbbbbbbbbbb</code>`,
		`<span class="badge health-progressing" title="New commit detected">Progressing</span>`,
		`<span class="badge health-healthy" title="">Healthy</span>`,
		// A source's error, escaped.
		`<pre class="error">db.yaml:3:5: spec.stack is required`+"\n"+`&lt;script&gt;alert(1)&lt;/script&gt;</pre>`,
		// Revisions, newest first: refused with the error, applied with the stacks it changed.
		`<span class="state state-failed">refused</span><pre class="error">config not applied: db.yaml:3:5: spec.stack is required</pre>`,
		`<span class="state state-succeeded">applied ✓</span>`,
		`<span class="muted">changed</span> <a href="/stacks/web">web</a>`,
		`<span class="muted">removed</span> <a href="/stacks/old%20%3Capp%3E">old &lt;app&gt;</a>`,
		`<span class="muted">added</span> <a href="/stacks/web">web</a>, <a href="/stacks/db">db</a>, <a href="/stacks/queue">queue</a>`,
		`<span class="source-name">/etc/stackd/stacks.yaml</span>`, "start")
	webtest.WantLacks(t, page, "<script>alert(1)", "<app>", uiCommitA+"</code>")
	if i, j := strings.Index(page, "refused</span>"), strings.Index(page, "applied ✓"); i < 0 || j < i {
		t.Error("revisions are not newest first")
	}
	if n := strings.Count(page, `<tr class="source`); n != 4 { // three sources and one error
		t.Errorf("%d source rows, want 4", n)
	}
}

// TestUIConfigReloadFailed: the config page shows a failed reload's
// problems in its own card rather than in the banner of other pages.
func TestUIConfigReloadFailed(t *testing.T) {
	api := newUIFakeAPI()
	api.config = model.ConfigStatus{LastSuccess: api.ago(time.Hour), LastAttempt: api.ago(time.Minute),
		Error: "config not applied: stacks.yaml:1:1: <bad>"}
	api.revisions = nil
	base := startUI(t, api)
	page := getPage(t, base+"/config", http.StatusOK)
	webtest.WantContains(t, page, `<pre class="error">config not applied: stacks.yaml:1:1: &lt;bad&gt;</pre>`,
		"The previous config stays in force.", `state-failed">failed`, `title="">Unknown</span>`,
		"The daemon reports no config sources.", "No revisions yet.")
	webtest.WantLacks(t, page, `role="alert"`, "<bad>")
	page = getPage(t, base+"/", http.StatusOK)
	webtest.WantContains(t, page, `role="alert"`, "0 sources", `title="">Unknown</span>`)
}

// TestUIConfigRevisionsError: the page stands when revisions cannot be read.
func TestUIConfigRevisionsError(t *testing.T) {
	page := getPage(t, startUI(t, failingRevisions{newUIFakeAPI().fakeAPI})+"/config", http.StatusOK)
	webtest.WantContains(t, page, "The revisions are unavailable: store: closed", "git&#43;git@github.com:acme/db.git")
}

func TestUIStackPageFinishedLog(t *testing.T) {
	page := getPage(t, startUI(t, newUIFakeAPI())+"/stacks/db", http.StatusOK)
	webtest.WantContains(t, page, "Stalled", "UpdateFailed", "up failed 3 times", "exit status 255", "No updates yet.", "No outputs.")
	webtest.WantLacks(t, page, "data-follow", `id="log"`)
}

func TestUIUnknownStack(t *testing.T) {
	base := startUI(t, newUIFakeAPI())
	page := getPage(t, base+"/stacks/nope", http.StatusNotFound)
	webtest.WantContains(t, page, "There is no stack named &#34;nope&#34;.")
	wantNav(t, page, "")
	resp, _ := fetch(t, http.MethodGet, base+"/nowhere", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nowhere: status %d", resp.StatusCode)
	}
}

func TestUISync(t *testing.T) {
	api := newUIFakeAPI()
	base := startUI(t, api)
	resp, body := fetch(t, http.MethodPost, base+"/stacks/db/sync", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/stacks/db" {
		t.Fatalf("sync: status %d, Location %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	resp, _ = fetch(t, http.MethodPost, base+"/stacks/nope/sync", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("sync of an unknown stack: status %d", resp.StatusCode)
	}
	if got := api.syncs(); len(got) != 1 || got[0] != "db" {
		t.Errorf("synced %q, want [db]", got)
	}
}

func TestUISyncNeedsToken(t *testing.T) {
	api := newUIFakeAPI()
	s := New(Options{Addr: "127.0.0.1:0", API: api, Token: "t0ken", Version: "v9.8.7"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	base := "http://" + s.Addr()
	// Without the token the sync buttons show, disabled, with the reason.
	for _, p := range []string{"/", "/stacks/db"} {
		page := getPage(t, base+p, http.StatusOK)
		webtest.WantContains(t, page, "v9.8.7", `<button type="button" disabled title="a valid API token is required`, "needs the API token")
		webtest.WantLacks(t, page, `action="/stacks/db/sync"`)
	}
	webtest.WantContains(t, getPage(t, base+"/stacks/db", http.StatusOK), "on the daemon&#39;s host: stackd sync db")
	resp, _ := fetch(t, http.MethodPost, base+"/stacks/db/sync", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sync without the token: status %d", resp.StatusCode)
	}
	bearer := http.Header{"Authorization": {"Bearer t0ken"}}
	if resp, page := fetch(t, http.MethodGet, base+"/stacks/db", bearer); resp.StatusCode != http.StatusOK || !strings.Contains(page, `action="/stacks/db/sync"`) ||
		strings.Contains(page, "needs the API token") {
		t.Errorf("stack page with the token: status %d, no sync button or a note that the token is needed", resp.StatusCode)
	}
	resp, _ = fetch(t, http.MethodPost, base+"/stacks/db/sync", bearer)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sync with the token: status %d", resp.StatusCode)
	}
	if got := api.syncs(); len(got) != 1 {
		t.Errorf("synced %q, want [db]", got)
	}
}

func TestUISyncCrossOrigin(t *testing.T) {
	api := newUIFakeAPI()
	base := startUI(t, api)
	resp, _ := fetch(t, http.MethodPost, base+"/stacks/db/sync", http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sync: status %d", resp.StatusCode)
	}
	if got := api.syncs(); len(got) != 0 {
		t.Errorf("synced %q", got)
	}
}

func TestUIStatic(t *testing.T) {
	base := startUI(t, newUIFakeAPI())
	css, err := assetURL("style.css")
	if err != nil {
		t.Fatal(err)
	}
	resp, body := fetch(t, http.MethodGet, base+css, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") || !strings.Contains(body, ".health-healthy") {
		t.Fatalf("GET %s: %d %q", css, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("versioned asset: Cache-Control %q", cc)
	}
	resp, _ = fetch(t, http.MethodGet, base+"/static/ui.js", http.Header{"If-None-Match": {resp.Header.Get("ETag")}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("unversioned asset: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	resp, _ = fetch(t, http.MethodGet, base+"/static/ui.js", http.Header{"If-None-Match": {resp.Header.Get("ETag")}})
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidated asset: status %d", resp.StatusCode)
	}
	for _, p := range []string{"/static/", "/static/nope.css", "/static/templates/list.html"} {
		if resp, _ := fetch(t, http.MethodGet, base+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d", p, resp.StatusCode)
		}
	}
}

// chromium is Debian's Chromium.
const chromium = "/usr/bin/chromium"

// runChromium runs headless Chromium with args and returns its standard
// output; it is killed after a minute.
func runChromium(t *testing.T, args ...string) []byte {
	t.Helper()
	profile, err := os.MkdirTemp("", "stackd-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile) // best effort: Chromium may leave files behind briefly
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + profile}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// artifactDir is where tests keep files for people to look at:
// $STACKD_TEST_ARTIFACTS, else .artifacts at the repository's root.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STACKD_TEST_ARTIFACTS")
	if dir == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves a PNG of url in the artifact directory as name.
func screenshot(t *testing.T, url, name string) {
	t.Helper()
	path := filepath.Join(artifactDir(t), name)
	_ = os.Remove(path)
	runChromium(t, "--screenshot="+path, "--window-size=1280,900", url)
	png, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("%s is not a PNG screenshot (%d bytes)", path, len(png))
	}
	t.Logf("screenshot of %s: %s", url, path)
}

func TestUIChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if testing.Short() {
			t.Skip("no Chromium:", err)
		}
		t.Fatal("the browser test needs Chromium:", err)
	}
	api := newUIFakeAPI()
	base := startUI(t, api)
	t.Cleanup(api.live.Close) // ends a follower before the server stops
	dom := string(runChromium(t, "--dump-dom", base+"/"))
	webtest.WantContains(t, dom, `href="/stacks/web"`, ">Progressing<", ">Degraded<")
	screenshot(t, base+"/", "ui-list.png")
	screenshot(t, base+"/stacks/web", "ui-stack.png")
	dom = string(runChromium(t, "--dump-dom", base+"/config"))
	webtest.WantContains(t, dom, ">Sources<", "git+git@github.com:acme/db.git", "applied ✓", "refused")
	screenshot(t, base+"/config", "ui-config.png")
}

// uiScriptAPI is uiFakeAPI with a page that changes on every render (its
// queue grows) and a running log that streams other text than the page
// shows, to tell what the script did.
type uiScriptAPI struct {
	*uiFakeAPI
	renders atomic.Int32
	logs    atomic.Int32
	stream  *livelog.Log
}

func (f *uiScriptAPI) Stats() model.Stats { return model.Stats{Queued: int(f.renders.Add(1))} }
func (f *uiScriptAPI) ClusterStatus() (model.ClusterStatus, bool) {
	return model.ClusterStatus{}, false
}
func (f *uiScriptAPI) RemoteLog(string) string         { return "" }
func (f *uiScriptAPI) Backup(io.Writer) (int64, error) { return 0, daemon.ErrNoBackup }
func (f *uiScriptAPI) Pause() int                      { return 0 }
func (f *uiScriptAPI) Resume()                         {}

// Log answers the page's first call as uiFakeAPI does, and later calls
// (the script's) with the stream.
func (f *uiScriptAPI) Log(id string) ([]byte, *livelog.Log, error) {
	if id == "web-3" && f.logs.Add(1) > 1 {
		return nil, f.stream, nil
	}
	return f.uiFakeAPI.Log(id)
}

// TestUIChromiumScript checks that the script streams the running log into
// the page and swaps in the refreshed page: Chromium's virtual time lets
// one refresh happen at once.
func TestUIChromiumScript(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if testing.Short() {
			t.Skip("no Chromium:", err)
		}
		t.Fatal("the browser test needs Chromium:", err)
	}
	api := &uiScriptAPI{uiFakeAPI: newUIFakeAPI(), stream: livelog.New()}
	_, _ = api.stream.Write([]byte("streamed by the script\n"))
	base := startUI(t, api)
	t.Cleanup(api.stream.Close)
	t.Cleanup(api.live.Close)
	dom := string(runChromium(t, "--virtual-time-budget=7000", "--dump-dom", base+"/stacks/web"))
	webtest.WantContains(t, dom, `data-follow="/api/v1/updates/web-3/log?follow=1">streamed by the script`, "0 running · 2 queued")
	webtest.WantLacks(t, dom, "aws:s3:Bucket assets creating")
}

// TestUIListCluster: in a cluster the list names the replica, its
// session, the leader and the members, and each stack's replica; a
// single node shows none of it.
func TestUIListCluster(t *testing.T) {
	stacks := []model.StackView{{Name: "app", Holder: "node-2"}}
	api := &fakeAPI{stacks: stacks, cluster: model.ClusterStatus{Node: "node-1", Leader: "node-2", Session: true,
		Members: []model.ClusterMember{{Name: "node-1"}, {Name: "node-2", Stacks: 1}}}}
	_, body := send(t, "GET", startServer(t, api)+"/", nil, "")
	for _, want := range []string{"replica <strong>node-1</strong>", "session ok", "leader node-2", "node-2 (1)", "<td>node-2</td>"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	_, body = send(t, "GET", startServer(t, &fakeAPI{stacks: stacks})+"/", nil, "")
	if strings.Contains(string(body), "cluster-summary") || strings.Contains(string(body), "Replica") {
		t.Error("a single node's list shows a cluster")
	}
}

// TestUITimesCarryTheirZone: a time on a page says it is UTC.
func TestUITimesCarryTheirZone(t *testing.T) {
	if got := funcs["utc"].(func(time.Time) string)(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))); got != "2026-01-02 02:04:05 UTC" {
		t.Fatalf("utc = %q", got)
	}
}

// TestUIFailingAndDriftedStacks: a failing stack with attempts left says
// "failing, retry 2 of 3 at …" on the list and its page; a drifted
// stack's sync button is "Sync with refresh", as its sync refreshes.
func TestUIFailingAndDriftedStacks(t *testing.T) {
	f := newUIFakeAPI()
	at := f.now.Add(90 * time.Second)
	q := &f.stacks[2]
	q.Status.LastUpdate = &model.LastUpdate{Name: "queue-1", Type: model.UpdateUp, State: model.UpdateFailed, Failures: 1, LastResyncTime: f.ago(time.Minute)}
	q.Status.Retry = &model.Retry{Attempt: 2, Of: 3, At: at}
	db := &f.stacks[1]
	db.Status.Drift = &spec.DriftStatus{State: spec.DriftDrifted, LastCheck: f.ago(time.Minute), Since: f.ago(time.Minute), Check: "db-8"}
	url := startUI(t, f)
	want := "failing, retry 2 of 3 at <time datetime=\"" + at.UTC().Format(time.RFC3339)
	for _, path := range []string{"/", "/stacks/queue"} {
		page := getPage(t, url+path, http.StatusOK)
		webtest.WantContains(t, page, want, "in 1m")
	}
	webtest.WantContains(t, getPage(t, url+"/stacks/db", http.StatusOK), ">Sync with refresh</button>")
	webtest.WantLacks(t, getPage(t, url+"/stacks/web", http.StatusOK), "Sync with refresh")
}

// TestUIReloadOverride: where the config page shows the mass-removal
// guard's refusal, it offers the one-off override, which reloads allowing
// that many removals.
func TestUIReloadOverride(t *testing.T) {
	api := newUIFakeAPI()
	base := startUI(t, api)
	webtest.WantLacks(t, getPage(t, base+"/config", http.StatusOK), "/config/reload")
	api.mu.Lock()
	api.config.Successful, api.config.Error, api.config.Removes = false, "config not applied: the new config removes 1 of the 1 stacks", 1
	api.mu.Unlock()
	webtest.WantContains(t, getPage(t, base+"/config", http.StatusOK),
		`action="/config/reload"`, `name="allowRemoval" value="1"`, "Apply, removing 1 stack</button>")
	resp, body := fetch(t, http.MethodPost, base+"/config/reload?allowRemoval=1", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/config" {
		t.Fatalf("override: status %d, Location %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.allowed) != 1 || api.allowed[0] != 1 {
		t.Fatalf("reloads allowing removal: %v", api.allowed)
	}
}

// TestUIConfigPolicies: the config page shows the policies in force and
// why the last load failed.
func TestUIConfigPolicies(t *testing.T) {
	api := newUIFakeAPI()
	api.config.Policies = &model.PolicyStatus{Source: "git+https://git.example.com/policies.git", Commit: strings.Repeat("ab", 20),
		Policies: []string{"stackd.files", "stackd.review"}, LastAttempt: api.ago(time.Minute),
		Error: "https://git.example.com/policies.git//files.rego:4:0: unexpected <eof>"}
	page := getPage(t, startUI(t, api)+"/config", http.StatusOK)
	webtest.WantContains(t, page, "<dt>Policies</dt>", "<code>stackd.files</code>, <code>stackd.review</code>",
		"from git&#43;https://git.example.com/policies.git at <code title=\""+strings.Repeat("ab", 20)+"\">",
		`state-failed">failed`, `<pre class="error">https://git.example.com/policies.git//files.rego:4:0: unexpected &lt;eof&gt;</pre>`,
		"The policies loaded before stay in force.")
	api.config.Policies = nil
	webtest.WantLacks(t, getPage(t, startUI(t, api)+"/config", http.StatusOK), "<dt>Policies</dt>")
}
