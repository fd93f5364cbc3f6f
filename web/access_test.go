package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

func TestRouteOf(t *testing.T) {
	open := route{Scope: scopeOpen}
	stack := func(action, name string) route { return route{Scope: scopeStack, Action: action, Stack: name} }
	update := func(id string) route { return route{Scope: scopeUpdate, Action: access.ActionRead, Update: id} }
	list := route{Scope: scopeList, Action: access.ActionRead}
	daemonWide := func(action string) route { return route{Scope: scopeDaemon, Action: action} }
	audit := func(name string) route {
		if name == "" {
			return route{Scope: scopeAudit, Action: access.ActionAdmin}
		}
		return route{Scope: scopeAudit, Action: access.ActionRead, Stack: name}
	}
	cases := []struct {
		method, target string
		want           route
	}{
		{"GET", "/healthz", open},
		{"HEAD", "/readyz", open},
		{"GET", "/static/style.css?v=1", open},
		{"POST", "/api/v1/webhooks/git", open},
		{"GET", "/auth/login?return=/stacks/app", open},
		{"GET", "/auth/callback?code=c&state=s", open},
		{"GET", "/auth/cli?port=8085&state=abcdefgh", open},
		{"POST", "/auth/logout", open},

		{"GET", "/", list},
		{"GET", "/?health=Degraded", list},
		{"GET", "/api/v1/stacks?view=summary", list},
		{"GET", "/previews", list},
		{"GET", "/api/v1/previews", list},

		{"GET", "/api/v1/stacks/app", stack(access.ActionRead, "app")},
		{"HEAD", "/api/v1/stacks/app/updates?limit=5", stack(access.ActionRead, "app")},
		{"GET", "/stacks/app", stack(access.ActionRead, "app")},
		{"GET", "/stacks/a%2Fb", stack(access.ActionRead, "a/b")},
		{"GET", "/api/v1/updates/app-3/log?follow=1", update("app-3")},
		{"GET", "/previews/app-4", update("app-4")},

		{"GET", "/config", daemonWide(access.ActionRead)},
		{"GET", "/api/v1/config", daemonWide(access.ActionRead)},
		{"GET", "/api/v1/config/revisions", daemonWide(access.ActionRead)},
		{"GET", "/api/v1/cluster", daemonWide(access.ActionRead)},
		{"GET", "/metrics", daemonWide(access.ActionRead)},
		{"GET", "/api/v1/nothing", daemonWide(access.ActionRead)},
		{"GET", "/api/v1/backup", daemonWide(access.ActionAdmin)},
		{"GET", "/api/v1/audit", audit("")},
		{"GET", "/api/v1/audit?stack=app&since=24h", audit("app")},
		{"GET", "/audit?stack=db", audit("db")},

		{"POST", "/api/v1/stacks/app/sync", stack(access.ActionSync, "app")},
		{"POST", "/stacks/app/sync", stack(access.ActionSync, "app")},
		{"POST", "/stacks/a%2Fb/sync", stack(access.ActionSync, "a/b")},
		{"POST", "/api/v1/stacks/app/approve", stack(access.ActionApprove, "app")},
		{"POST", "/api/v1/stacks/app/cancel", stack(access.ActionCancel, "app")},
		{"POST", "/api/v1/reload", daemonWide(access.ActionReload)},
		{"POST", "/api/v1/pause?wait=1s", daemonWide(access.ActionPause)},
		{"POST", "/api/v1/resume", daemonWide(access.ActionPause)},

		// What no entry names is closed: admin for anything that may
		// change something.
		{"POST", "/api/v1/stacks/app", daemonWide(access.ActionAdmin)},
		{"POST", "/api/v1/stacks/app/destroy", daemonWide(access.ActionAdmin)},
		{"PUT", "/api/v1/stacks/app/sync", daemonWide(access.ActionAdmin)},
		{"DELETE", "/api/v1/stacks/app", daemonWide(access.ActionAdmin)},
		{"OPTIONS", "/healthz", daemonWide(access.ActionAdmin)},
		{"POST", "/healthz", daemonWide(access.ActionAdmin)},
		// Paths are cleaned as the mux cleans them.
		{"POST", "/api/v1/../v1/stacks/app/sync", stack(access.ActionSync, "app")},
		{"POST", "//api/v1/reload", daemonWide(access.ActionReload)},
		{"GET", "/stacks/app/", stack(access.ActionRead, "app")},
	}
	for _, c := range cases {
		u, err := url.ParseRequestURI(c.target) // as the server parses it
		if err != nil {
			t.Fatal(err)
		}
		if got := routeOf(c.method, u); got != c.want {
			t.Errorf("%s %s = %+v, want %+v", c.method, c.target, got, c.want)
		}
	}
}

// fakeAccess knows tokens and session cookies by value and grants
// actions by principal name ("" for anonymous requests): each grant is
// an action (admin allows all) and a stack glob, empty for every stack
// and daemon-wide, or "label:KEY=VALUE" for the stacks with that label.
type fakeAccess struct {
	tokens   map[string]model.Principal
	sessions map[string]model.Principal
	grants   map[string][]grant
}

type grant struct{ action, glob string }

func (f *fakeAccess) Bearer(tok string) (model.Principal, error) {
	if p, ok := f.tokens[tok]; ok {
		return p, nil
	}
	return anonymous, fmt.Errorf("unknown or revoked API token: %w", access.ErrUnauthenticated)
}

func (f *fakeAccess) Session(c string) (model.Principal, error) {
	if p, ok := f.sessions[c]; ok {
		return p, nil
	}
	return anonymous, fmt.Errorf("session: bad signature: %w", access.ErrUnauthenticated)
}

func (f *fakeAccess) Allowed(p model.Principal, action string, stack *access.StackRef) (bool, string) {
	if p.Kind == model.PrincipalAdmin {
		return true, ""
	}
	for _, g := range f.grants[p.Name] {
		if g.action != action && g.action != access.ActionAdmin {
			continue
		}
		if g.glob == "" {
			return true, ""
		}
		if stack == nil {
			continue
		}
		if k, v, ok := strings.Cut(strings.TrimPrefix(g.glob, "label:"), "="); ok && strings.HasPrefix(g.glob, "label:") {
			if stack.Labels[k] == v {
				return true, ""
			}
			continue
		}
		if ok, _ := path.Match(g.glob, stack.Name); ok {
			return true, ""
		}
	}
	on := "daemon-wide"
	if stack != nil {
		on = "stack " + stack.Name
	}
	return false, fmt.Sprintf("%s %q may not %s %s", p.Kind, p.Name, action, on)
}

// RolesAllowing makes fakeAccess a RoleLister.
func (f *fakeAccess) RolesAllowing(action string, stack *access.StackRef) []string {
	return []string{"operator"}
}

// Credentials of newFakeAccess.
const (
	viewerToken   = "viewer-token-secret"
	operatorToken = "operator-token-secret"
	adminToken    = "admin-token-secret"
	aliceCookie   = "alice-session-cookie"
)

// newFakeAccess: the token ci-viewer reads every stack; the token ci
// reads and syncs every stack; alice (signed in) reads and syncs app*
// only; the admin token does everything.
func newFakeAccess() *fakeAccess {
	return &fakeAccess{
		tokens: map[string]model.Principal{
			viewerToken:   {Kind: model.PrincipalToken, Name: "ci-viewer"},
			operatorToken: {Kind: model.PrincipalToken, Name: "ci"},
			adminToken:    {Kind: model.PrincipalAdmin},
		},
		sessions: map[string]model.Principal{
			aliceCookie: {Kind: model.PrincipalUser, Name: "alice", Subject: "sub-1", Groups: []string{"dev", "ops"}},
		},
		grants: map[string][]grant{
			"ci-viewer": {{access.ActionRead, ""}},
			"ci":        {{access.ActionRead, ""}, {access.ActionSync, "*"}},
			"alice":     {{access.ActionRead, "app*"}, {access.ActionSync, "app*"}},
		},
	}
}

// memAudit is an AuditLog in memory.
type memAudit struct {
	mu      sync.Mutex
	entries []model.AuditEntry
	err     error
}

func (m *memAudit) PutAudit(e model.AuditEntry) (model.AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return e, m.err
	}
	e.Seq = uint64(len(m.entries) + 1)
	m.entries = append(m.entries, e)
	return e, nil
}

func (m *memAudit) Audit(f audit.Filter) ([]model.AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []model.AuditEntry
	for i := len(m.entries) - 1; i >= 0; i-- {
		e := m.entries[i]
		if f.Matches(e) && (f.Before == 0 || e.Seq < f.Before) && (f.Limit == 0 || len(out) < f.Limit) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memAudit) PruneAudit(time.Time) (int, error) { return 0, nil }

// all is every entry, oldest first.
func (m *memAudit) all() []model.AuditEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries)
}

// twoStacks is a daemon with the stacks app and db.
func twoStacks() *fakeAPI {
	return &fakeAPI{stacks: []model.StackView{
		{Name: "app", Spec: map[string]any{"stack": "dev"}, Source: "/etc/stackd/app.yaml"},
		{Name: "db", Spec: map[string]any{"stack": "prod"}, Source: "/etc/stackd/db.yaml"},
	}, updates: []model.Update{{ID: "db-1", Stack: "db", Seq: 1, State: model.UpdateSucceeded}},
		logs: map[string][]byte{"db-1": []byte("db's log\n")}}
}

// TestAccessSync: a token without sync gets 403 naming the action, the
// stack and the roles that would allow it; no credential and a revoked
// one get 401; the operator token syncs. Each is in the audit trail with
// who it was, and the allowed sync too.
// TestAccessByLabel: a role that selects stacks by label sees the
// stack's labels: it may sync a stack that has the label, not another,
// and reads in the list the stacks that have it.
func TestAccessByLabel(t *testing.T) {
	api := twoStacks()
	api.stacks[0].Labels = map[string]string{"team": "a"}
	fa := newFakeAccess()
	fa.grants["ci"] = []grant{{access.ActionSync, "label:team=a"}}
	_, base := startWith(t, Options{API: api, Access: fa, Audit: &memAudit{}})
	if code, v := callWith(t, "POST", base+"/api/v1/stacks/app/sync", bearer(operatorToken), ""); code != http.StatusAccepted {
		t.Errorf("sync of the labelled stack = %d %v", code, v)
	}
	if code, v := callWith(t, "POST", base+"/api/v1/stacks/db/sync", bearer(operatorToken), ""); code != http.StatusForbidden {
		t.Errorf("sync of another stack = %d %v", code, v)
	}

	// The list shows a role that reads by label the stacks with the label.
	fa.grants["ci-viewer"] = []grant{{access.ActionRead, "label:team=a"}}
	_, base = startWith(t, Options{API: api, Access: fa, Audit: &memAudit{}, ReadRequiresToken: true})
	for _, view := range []string{"full", "summary"} {
		code, v := callWith(t, "GET", base+"/api/v1/stacks?view="+view, bearer(viewerToken), "")
		if stacks, _ := v["stacks"].([]any); code != http.StatusOK || len(stacks) != 1 || v["total"] != 1.0 ||
			stacks[0].(map[string]any)["name"] != "app" {
			t.Errorf("%s list read by label = %d %v", view, code, v)
		}
	}
}

func TestAccessSync(t *testing.T) {
	api, trail := twoStacks(), &memAudit{}
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), Audit: trail, Node: "node-1"})
	sync := base + "/api/v1/stacks/app/sync?note=" + operatorToken // a query is never recorded

	code, v := callWith(t, "POST", sync, bearer(viewerToken), "")
	if code != http.StatusForbidden || v["action"] != "sync" || v["stack"] != "app" ||
		!strings.Contains(fmt.Sprint(v["error"]), `may not sync stack app`) || fmt.Sprint(v["allowedBy"]) != "[operator]" {
		t.Errorf("viewer's sync = %d %v", code, v)
	}
	for name, h := range map[string]http.Header{"none": nil, "revoked": bearer("revoked-token-secret")} {
		resp, body := send(t, "POST", sync, h, "")
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: sync = %d %s", name, resp.StatusCode, body)
		}
	}
	if n, _, _ := api.calls(); n != 0 {
		t.Fatalf("refused syncs ran: %d", n)
	}
	if code, v := callWith(t, "POST", sync, bearer(operatorToken), ""); code != http.StatusAccepted {
		t.Fatalf("operator's sync = %d %v", code, v)
	}
	if code, _ := callWith(t, "POST", base+"/api/v1/stacks/nope/sync", bearer(operatorToken), ""); code != http.StatusNotFound {
		t.Errorf("operator's sync of an unknown stack = %d", code)
	}

	got := trail.all()
	want := []struct{ kind, name, outcome string }{
		{model.PrincipalToken, "ci-viewer", model.AuditDenied},
		{model.PrincipalAnonymous, "", model.AuditUnauthenticated},
		{model.PrincipalAnonymous, "", model.AuditUnauthenticated},
		{model.PrincipalToken, "ci", model.AuditAllowed},
		{model.PrincipalToken, "ci", model.AuditFailed},
	}
	if len(got) != len(want) {
		t.Fatalf("audit trail: %+v", got)
	}
	// The two unauthenticated ones came in either order (map).
	for i, w := range want {
		e := got[i]
		if e.Principal.Kind != w.kind || e.Principal.Name != w.name || e.Outcome != w.outcome || e.Action != access.ActionSync {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
		if e.Method != "POST" || e.Node != "node-1" || e.Remote != "127.0.0.1" || e.Time.IsZero() {
			t.Errorf("entry %d lacks the request's facts: %+v", i, e)
		}
	}
	if e := got[0]; e.Stack != "app" || e.Path != "/api/v1/stacks/app/sync" || e.Status != 403 || !strings.Contains(e.Reason, "may not sync") {
		t.Errorf("denied entry = %+v", e)
	}
	if e := got[3]; e.Status != 202 || e.Reason != "" {
		t.Errorf("allowed entry = %+v", e)
	}
	if e := got[4]; e.Status != 404 || e.Stack != "nope" || !strings.Contains(e.Reason, "unknown stack") {
		t.Errorf("failed entry = %+v", e)
	}
	if reasons := got[1].Reason + got[2].Reason; !strings.Contains(reasons, "revoked") {
		t.Errorf("the revoked token's refusal does not say so: %q", reasons)
	}
	raw, _ := json.Marshal(got)
	for _, secret := range []string{viewerToken, operatorToken, "revoked-token-secret", "note="} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit trail holds %q: %s", secret, raw)
		}
	}
}

// TestAccessDaemonWide: reload, pause and backup need a role without a
// stack scope; the admin token has it.
func TestAccessDaemonWide(t *testing.T) {
	api, trail := twoStacks(), &memAudit{}
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), Audit: trail})
	for _, path := range []string{"/api/v1/reload", "/api/v1/pause?wait=0s", "/api/v1/resume"} {
		if code, v := callWith(t, "POST", base+path, bearer(operatorToken), ""); code != http.StatusForbidden {
			t.Errorf("operator POST %s = %d %v", path, code, v)
		}
		if code, v := callWith(t, "POST", base+path, bearer(adminToken), ""); code != http.StatusOK {
			t.Errorf("admin POST %s = %d %v", path, code, v)
		}
	}
	if resp, body := send(t, "GET", base+"/api/v1/backup", bearer(operatorToken), ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("operator backup = %d %s", resp.StatusCode, body)
	}
	if _, reloads, _ := api.calls(); reloads != 1 {
		t.Errorf("reloads = %d, want 1", reloads)
	}
	var actions []string
	for _, e := range trail.all() {
		actions = append(actions, e.Action+" "+e.Outcome)
	}
	want := []string{"reload denied", "reload allowed", "pause denied", "pause allowed", "pause denied", "pause allowed", "admin denied"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit trail = %q, want %q", actions, want)
	}
}

// TestAccessReadsOpen: without ReadRequiresToken everyone reads, and
// reads are not recorded; a credential that is refused is still 401.
func TestAccessReadsOpen(t *testing.T) {
	trail := &memAudit{}
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), Audit: trail})
	for _, p := range []string{"/api/v1/stacks", "/api/v1/stacks/db", "/api/v1/config", "/api/v1/updates/db-1/log"} {
		if resp, body := send(t, "GET", base+p, nil, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("anonymous GET %s = %d %s", p, resp.StatusCode, body)
		}
	}
	if resp, _ := send(t, "GET", base+"/api/v1/stacks", bearer("revoked-token-secret"), ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token's read = %d", resp.StatusCode)
	}
	if resp, _ := send(t, "GET", base+"/healthz", bearer("revoked-token-secret"), ""); resp.StatusCode != http.StatusOK {
		t.Errorf("a probe with a revoked token = %d", resp.StatusCode)
	}
	if got := trail.all(); len(got) != 1 || got[0].Outcome != model.AuditUnauthenticated || got[0].Action != access.ActionRead {
		t.Errorf("audit trail = %+v, want the one refused read", got)
	}
}

// TestAccessReadsFollowRoles: with ReadRequiresToken, alice (app* only)
// lists app alone, reads it, and gets 403 for db, its updates' logs and
// the config; anonymous API reads get 401; refused reads are recorded.
func TestAccessReadsFollowRoles(t *testing.T) {
	api, trail := twoStacks(), &memAudit{}
	api.stacks = append(api.stacks, model.StackView{Name: "app-2", Source: "/etc/stackd/app.yaml"})
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), Audit: trail, ReadRequiresToken: true})
	alice := http.Header{"Cookie": {sessionCookie + "=" + aliceCookie}}

	var list struct{ Stacks []model.StackView }
	resp, body := send(t, "GET", base+"/api/v1/stacks", alice, "")
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("alice's list = %d %s", resp.StatusCode, body)
	}
	var names []string
	for _, v := range list.Stacks {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"app", "app-2"}) {
		t.Errorf("alice lists %q, want [app app-2]", names)
	}
	for path, want := range map[string]int{
		"/api/v1/stacks/app": 200, "/api/v1/stacks/db": 403, "/api/v1/stacks/db/updates": 403,
		"/api/v1/updates/db-1/log": 403, "/api/v1/config": 403, "/api/v1/audit": 403,
	} {
		if resp, body := send(t, "GET", base+path, alice, ""); resp.StatusCode != want {
			t.Errorf("alice GET %s = %d, want %d: %s", path, resp.StatusCode, want, body)
		}
	}
	if resp, _ := send(t, "GET", base+"/api/v1/stacks", nil, ""); resp.StatusCode != 401 {
		t.Errorf("anonymous list = %d, want 401", resp.StatusCode)
	}
	if code, _ := callWith(t, "GET", base+"/api/v1/stacks", bearer(viewerToken), ""); code != 200 {
		t.Errorf("viewer's list = %d", code)
	}
	_, page := fetch(t, "GET", base+"/", alice)
	webtest.WantContains(t, page, "2 stacks", "1 more that your roles do not let you read", `href="/stacks/app-2"`)
	webtest.WantLacks(t, page, `href="/stacks/db"`)
	denied := 0
	for _, e := range trail.all() {
		if e.Outcome == model.AuditDenied && e.Principal.Name == "alice" {
			denied++
		}
		if e.Path == "/api/v1/updates/db-1/log" && e.Stack != "db" {
			t.Errorf("the refused log read names stack %q, want db", e.Stack)
		}
	}
	if denied != 5 {
		t.Errorf("%d refused reads of alice recorded, want 5: %+v", denied, trail.all())
	}
}

// TestAccessUI: the header names who is signed in; a sync the viewer may
// not start is shown disabled with the reason; one they may start is a
// form; a refused UI sync is a 403 page.
func TestAccessUI(t *testing.T) {
	api := twoStacks()
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), SignIn: &fakeSignIn{}, Audit: &memAudit{}})
	alice := http.Header{"Cookie": {sessionCookie + "=" + aliceCookie}}

	resp, page := fetch(t, "GET", base+"/", alice)
	if resp.StatusCode != 200 {
		t.Fatalf("list = %d", resp.StatusCode)
	}
	webtest.WantContains(t, page, "Signed in as <strong>alice</strong>", "(dev, ops)", `action="/auth/logout"`, "Sign out",
		`action="/stacks/app/sync"`, `disabled title="user &#34;alice&#34; may not sync stack db"`, "needs a role with sync on this stack")
	webtest.WantLacks(t, page, `action="/stacks/db/sync"`, "Sign in</a>")

	_, page = fetch(t, "GET", base+"/stacks/db", nil)
	webtest.WantContains(t, page, `href="/auth/login?return=%2Fstacks%2Fdb"`, "Sign in", "sign in to sync", `disabled title=`)
	webtest.WantLacks(t, page, "Sign out")

	_, page = fetch(t, "GET", base+"/", bearer(operatorToken))
	webtest.WantContains(t, page, "Token <strong>ci</strong>", `action="/stacks/db/sync"`)
	_, page = fetch(t, "GET", base+"/", bearer(adminToken))
	webtest.WantContains(t, page, "Admin token")

	resp, page = fetch(t, "POST", base+"/stacks/db/sync", alice)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "may not sync stack db") {
		t.Errorf("alice's UI sync of db = %d", resp.StatusCode)
	}
	if resp, _ := fetch(t, "POST", base+"/stacks/app/sync", alice); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("alice's UI sync of app = %d", resp.StatusCode)
	}
	if n, _, _ := api.calls(); n != 1 {
		t.Errorf("%d syncs, want 1", n)
	}
}

// TestAccessSignInRedirect: with reads closed and sign-in set up, a
// browser navigating to a page is sent to sign in, returning there; the
// page's own refresh (fetch) gets a 401; the API always gets a 401; a
// session cookie that is refused is deleted.
func TestAccessSignInRedirect(t *testing.T) {
	trail := &memAudit{}
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), SignIn: &fakeSignIn{}, Audit: trail, ReadRequiresToken: true})
	for _, h := range []http.Header{nil, {"Sec-Fetch-Mode": {"navigate"}}} {
		resp, _ := fetch(t, "GET", base+"/stacks/app?x=1", h)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/auth/login?return=%2Fstacks%2Fapp%3Fx%3D1" {
			t.Errorf("navigation %v: %d to %q", h, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if n := len(trail.all()); n != 0 {
		t.Errorf("browsers sent to sign in are recorded: %+v", trail.all())
	}
	if resp, _ := fetch(t, "GET", base+"/stacks/app", http.Header{"Sec-Fetch-Mode": {"cors"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a refresh: %d, want 401", resp.StatusCode)
	}
	if resp, _ := fetch(t, "GET", base+"/api/v1/stacks/app", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API: %d, want 401", resp.StatusCode)
	}
	resp, _ := fetch(t, "GET", base+"/", http.Header{"Cookie": {sessionCookie + "=forged"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/auth/login") {
		t.Errorf("a forged session: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := cookieNamed(resp, sessionCookie); c == nil || c.MaxAge >= 0 {
		t.Errorf("the forged session cookie is not deleted: %+v", c)
	}
	last := trail.all()[len(trail.all())-1]
	if last.Outcome != model.AuditUnauthenticated || !strings.Contains(last.Reason, "bad signature") || last.Status != http.StatusSeeOther {
		t.Errorf("the forged session's record = %+v", last)
	}
}

// TestAccessLegacyToken: without Access, the single token still decides
// exactly as before, and the trail records the admin token's actions.
func TestAccessLegacyToken(t *testing.T) {
	trail := &memAudit{}
	_, base := startWith(t, Options{API: twoStacks(), Token: "tok", Audit: trail})
	if code, _ := callWith(t, "GET", base+"/api/v1/stacks", bearer("wrong"), ""); code != 200 {
		t.Errorf("a read with a wrong token = %d, want 200 as before", code)
	}
	if code, _ := callWith(t, "POST", base+"/api/v1/stacks/app/sync", bearer("wrong"), ""); code != 401 {
		t.Errorf("a sync with a wrong token = %d", code)
	}
	if code, _ := callWith(t, "POST", base+"/api/v1/stacks/app/sync", bearer("tok"), ""); code != 202 {
		t.Errorf("a sync with the token = %d", code)
	}
	if code, _ := callWith(t, "GET", base+"/api/v1/audit", nil, ""); code != 401 {
		t.Errorf("the audit trail without the token = %d", code)
	}
	code, v := callWith(t, "GET", base+"/api/v1/audit", bearer("tok"), "")
	entries, _ := v["entries"].([]any)
	if code != 200 || len(entries) != 3 { // the refused sync, the sync, the refused audit read
		t.Fatalf("audit = %d %v", code, v)
	}
	if e := entries[1].(map[string]any); fmt.Sprint(e["principal"]) != "map[kind:admin]" || e["outcome"] != "allowed" {
		t.Errorf("the admin token's sync = %v", e)
	}
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}
