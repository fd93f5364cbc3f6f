package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
	"github.com/stackd/stackd/web/webtest"
)

// Commits of the fake StackSets' rollout.
const (
	setCommitOld = "0123456789abcdef0123456789abcdef01234567"
	setCommitNew = "fedcba9876543210fedcba9876543210fedcba98"
)

// fakeStackSets serves sets as they are given and records the resumes
// and aborts; err, when set, is what they return.
type fakeStackSets struct {
	mu      sync.Mutex
	sets    []model.StackSetView
	err     error
	actions []string // "resume web by ci"
}

func (f *fakeStackSets) StackSets() []model.StackSetView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sets)
}

func (f *fakeStackSets) StackSet(name string) (model.StackSetView, error) {
	for _, v := range f.StackSets() {
		if v.Name == name {
			return v, nil
		}
	}
	return model.StackSetView{}, fmt.Errorf("unknown stack set: %w", model.ErrNotFound)
}

func (f *fakeStackSets) ResumeRollout(name string, by model.Principal) error {
	return f.act("resume", name, by)
}

func (f *fakeStackSets) AbortRollout(name string, by model.Principal) error {
	return f.act("abort", name, by)
}

func (f *fakeStackSets) act(what, name string, by model.Principal) error {
	if _, err := f.StackSet(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.actions = append(f.actions, what+" "+name+" by "+by.String())
	return nil
}

func (f *fakeStackSets) done() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.actions)
}

// setsFixture is a daemon with the stacks web-dev and web-prod (of the
// set "web", labelled team=web) and db (of the set "mixed", with
// web-dev, labelled team=db), and the sets: "web", whose rollout halted
// at its second step on web-prod and still lists old-web, a stack that
// left the set; "mixed", without a rollout; and "empty", generating no
// stack.
func setsFixture() (*fakeAPI, *fakeStackSets) {
	web := map[string]string{"team": "web"}
	api := &fakeAPI{stacks: []model.StackView{
		{Name: "db", Labels: map[string]string{"team": "db"}, Owner: "StackSet/mixed"},
		{Name: "web-dev", Labels: web, Owner: "StackSet/web"},
		{Name: "web-prod", Labels: web, Owner: "StackSet/web"},
	}}
	lastOK := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	sets := &fakeStackSets{sets: []model.StackSetView{
		{Name: "empty", Generators: []model.GeneratorStatus{{Path: "spec.generators[0]", Kind: "list"}}},
		{Name: "mixed", Stacks: []string{"db", "web-dev"}},
		{Name: "web", Source: "/etc/stackd/web.yaml", Stacks: []string{"web-dev", "web-prod"},
			Generators: []model.GeneratorStatus{{Path: "spec.generators[0]", Kind: "git directories",
				Repository: "https://github.com/acme/envs.git", Commit: setCommitNew, Items: 2, Origins: []string{"envs/dev", "envs/prod"},
				Error: "git fetch: <connection reset>", LastSuccess: lastOK}},
			Rollout: &model.RolloutStatus{Set: "web", State: model.RolloutHalted, Step: 2, HaltedBy: []string{"web-prod"},
				Message: "web-prod failed on " + setCommitNew[:7],
				Steps: []model.RolloutStepStatus{
					{Selector: "env=dev", Stacks: []model.RolloutStack{{Name: "web-dev", State: model.MemberSucceeded, Commit: setCommitNew, AppliedCommit: setCommitNew}}},
					{Selector: "env=prod", MaxUpdate: 1, Stacks: []model.RolloutStack{
						{Name: "web-prod", State: model.MemberFailed, Commit: setCommitNew, AppliedCommit: setCommitOld},
						{Name: "old-web", State: model.MemberWaiting, Commit: setCommitNew}}},
				}}},
	}}
	return api, sets
}

// setsAccess is newFakeAccess with alice reading and syncing web-*, and
// the token ci-viewer reading the stacks labelled team=web only.
func setsAccess() *fakeAccess {
	fa := newFakeAccess()
	fa.grants["alice"] = []grant{{access.ActionRead, "web-*"}, {access.ActionSync, "web-*"}}
	fa.grants["ci-viewer"] = []grant{{access.ActionRead, "label:team=web"}}
	return fa
}

func TestRouteOfStackSets(t *testing.T) {
	set := func(action, name string) route { return route{Scope: scopeSet, Action: action, Set: name} }
	list := route{Scope: scopeList, Action: access.ActionRead}
	for target, want := range map[string]route{
		"GET /api/v1/stacksets":             list,
		"GET /stacksets":                    list,
		"GET /api/v1/stacksets/web":         set(access.ActionRead, "web"),
		"HEAD /stacksets/a%2Fb":             set(access.ActionRead, "a/b"),
		"POST /api/v1/stacksets/web/resume": set(access.ActionSync, "web"),
		"POST /api/v1/stacksets/web/abort":  set(access.ActionSync, "web"),
		"POST /stacksets/web/resume":        set(access.ActionSync, "web"),
		"POST /stacksets/web/abort":         set(access.ActionSync, "web"),
		// What no entry names is closed.
		"POST /api/v1/stacksets/web":        {Scope: scopeDaemon, Action: access.ActionAdmin},
		"POST /api/v1/stacksets/web/delete": {Scope: scopeDaemon, Action: access.ActionAdmin},
	} {
		method, path, _ := strings.Cut(target, " ")
		u, err := url.ParseRequestURI(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := routeOf(method, u); got != want {
			t.Errorf("%s = %+v, want %+v", target, got, want)
		}
	}
}

// TestStackSetsAPI: the list and a set in the shape of model.StackSetView
// (empty lists as []), 404 for an unknown set, resume and abort with the
// rollout as it stands after them, 409 when the rollout cannot take one.
func TestStackSetsAPI(t *testing.T) {
	api, sets := setsFixture()
	_, base := startWith(t, Options{API: api, StackSets: sets})

	resp, body := send(t, "GET", base+"/api/v1/stacksets", nil, "")
	var list struct{ StackSets []model.StackSetView }
	if err := json.Unmarshal(body, &list); resp.StatusCode != http.StatusOK || err != nil || len(list.StackSets) != 3 {
		t.Fatalf("list = %d %s (%v)", resp.StatusCode, body, err)
	}
	webtest.WantContains(t, string(body), `"stacks": []`, `"generators": []`)

	_, body = send(t, "GET", base+"/api/v1/stacksets/web", nil, "")
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	ro, _ := raw["rollout"].(map[string]any)
	steps, _ := ro["steps"].([]any)
	if raw["name"] != "web" || raw["source"] != "/etc/stackd/web.yaml" || ro["state"] != "Halted" || ro["step"] != 2.0 || len(steps) != 2 ||
		fmt.Sprint(ro["haltedBy"]) != "[web-prod]" || fmt.Sprint(raw["stacks"]) != "[web-dev web-prod]" {
		t.Fatalf("GET web = %s", body)
	}
	step := steps[1].(map[string]any)
	member := step["stacks"].([]any)[0].(map[string]any)
	if step["selector"] != "env=prod" || step["maxUpdate"] != 1.0 || member["name"] != "web-prod" || member["state"] != "Failed" ||
		member["commit"] != setCommitNew || member["appliedCommit"] != setCommitOld {
		t.Errorf("step 2 = %v", step)
	}
	gen := raw["generators"].([]any)[0].(map[string]any)
	if gen["kind"] != "git directories" || gen["items"] != 2.0 || gen["lastSuccess"] != "2025-03-01T12:00:00Z" || gen["error"] == nil {
		t.Errorf("generator = %v", gen)
	}
	if code, v := call(t, "GET", base+"/api/v1/stacksets/nope"); code != http.StatusNotFound || !strings.Contains(fmt.Sprint(v["error"]), "not found") {
		t.Errorf("GET nope = %d %v", code, v)
	}

	code, v := call(t, "POST", base+"/api/v1/stacksets/web/resume")
	if code != http.StatusOK || v["name"] != "web" || v["action"] != "resume" || v["rollout"].(map[string]any)["state"] != "Halted" {
		t.Errorf("resume = %d %v", code, v)
	}
	if code, v := call(t, "POST", base+"/api/v1/stacksets/mixed/abort"); code != http.StatusOK || v["rollout"] != nil {
		t.Errorf("abort of a set without rollout (the fake takes it) = %d %v", code, v)
	}
	if code, _ := call(t, "POST", base+"/api/v1/stacksets/nope/abort"); code != http.StatusNotFound {
		t.Errorf("abort nope = %d", code)
	}
	sets.err = fmt.Errorf("set web: nothing halted: %w", ErrRolloutState)
	if code, v := call(t, "POST", base+"/api/v1/stacksets/web/resume"); code != http.StatusConflict || !strings.Contains(fmt.Sprint(v["error"]), "nothing halted") {
		t.Errorf("resume of a rollout that cannot = %d %v", code, v)
	}
	sets.err = errors.New("store: disk full")
	if code, _ := call(t, "POST", base+"/api/v1/stacksets/web/abort"); code != http.StatusInternalServerError {
		t.Errorf("abort failing = %d", code)
	}
	if got := strings.Join(sets.done(), "; "); got != "resume web by anonymous; abort mixed by anonymous" {
		t.Errorf("actions = %s", got)
	}
}

// TestStackSetsAbsent: without Options.StackSets every route is a 404
// and the navigation does not link the sets.
func TestStackSetsAbsent(t *testing.T) {
	api, _ := setsFixture()
	_, base := startWith(t, Options{API: api})
	for _, target := range []string{"GET /api/v1/stacksets", "GET /api/v1/stacksets/web", "POST /api/v1/stacksets/web/resume", "POST /api/v1/stacksets/web/abort"} {
		method, path, _ := strings.Cut(target, " ")
		if code, v := call(t, method, base+path); code != http.StatusNotFound {
			t.Errorf("%s = %d %v", target, code, v)
		}
	}
	getPage(t, base+"/stacksets", http.StatusNotFound)
	getPage(t, base+"/stacksets/web", http.StatusNotFound)
	webtest.WantLacks(t, getPage(t, base+"/", http.StatusOK), `href="/stacksets"`)
}

// setNames are the names of a list's sets.
func setNames(t *testing.T, base string, h http.Header) (int, []string) {
	t.Helper()
	resp, body := send(t, "GET", base+"/api/v1/stacksets", h, "")
	var list struct{ StackSets []model.StackSetView }
	_ = json.Unmarshal(body, &list)
	var names []string
	for _, v := range list.StackSets {
		names = append(names, v.Name)
	}
	return resp.StatusCode, names
}

// TestStackSetsAccess: a set is read by who may read every one of its
// stacks (any identified caller for a set without stacks), and its view
// lists only the stacks the caller may read; resume and abort need sync
// on every stack, and are in the audit trail as a sync of
// "StackSet/NAME" whatever their outcome.
func TestStackSetsAccess(t *testing.T) {
	api, sets := setsFixture()
	trail := &memAudit{}
	_, base := startWith(t, Options{API: api, StackSets: sets, Access: setsAccess(), Audit: trail, ReadRequiresToken: true})
	alice := http.Header{"Cookie": {sessionCookie + "=" + aliceCookie}}

	for who, c := range map[string]struct {
		h    http.Header
		want string
	}{
		"admin":             {bearer(adminToken), "[empty mixed web]"},
		"ci (reads all)":    {bearer(operatorToken), "[empty mixed web]"},
		"alice (web-*)":     {alice, "[empty web]"},
		"viewer (by label)": {bearer(viewerToken), "[empty web]"},
	} {
		if code, names := setNames(t, base, c.h); code != http.StatusOK || fmt.Sprint(names) != c.want {
			t.Errorf("%s lists %d %v, want %s", who, code, names, c.want)
		}
	}
	if code, _ := setNames(t, base, nil); code != http.StatusUnauthorized {
		t.Errorf("an anonymous list = %d", code)
	}
	if code, v := callWith(t, "GET", base+"/api/v1/stacksets/mixed", alice, ""); code != http.StatusForbidden || v["stack"] != "StackSet/mixed" {
		t.Errorf("alice reads mixed: %d %v", code, v)
	}
	// old-web, in the rollout but no longer in the set, is hidden from
	// alice, who may not read it; not from ci, who reads every stack.
	_, body := send(t, "GET", base+"/api/v1/stacksets/web", alice, "")
	webtest.WantLacks(t, string(body), "old-web")
	webtest.WantContains(t, string(body), `"web-prod"`)
	_, body = send(t, "GET", base+"/api/v1/stacksets/web", bearer(operatorToken), "")
	webtest.WantContains(t, string(body), "old-web")

	for _, c := range []struct {
		who, path string
		h         http.Header
		want      int
	}{
		{"viewer", "/api/v1/stacksets/web/resume", bearer(viewerToken), http.StatusForbidden},
		{"ci", "/api/v1/stacksets/web/resume", bearer(operatorToken), http.StatusOK},
		{"alice", "/api/v1/stacksets/web/abort", alice, http.StatusOK},
		{"alice", "/api/v1/stacksets/mixed/abort", alice, http.StatusForbidden},
		{"alice", "/api/v1/stacksets/empty/abort", alice, http.StatusForbidden},
		{"nobody", "/api/v1/stacksets/web/abort", nil, http.StatusUnauthorized},
		{"ci", "/api/v1/stacksets/nope/resume", bearer(operatorToken), http.StatusForbidden}, // an unknown set: sync daemon-wide
		{"admin", "/api/v1/stacksets/nope/resume", bearer(adminToken), http.StatusNotFound},
	} {
		if code, v := callWith(t, "POST", base+c.path, c.h, ""); code != c.want {
			t.Errorf("%s: POST %s = %d %v, want %d", c.who, c.path, code, v, c.want)
		}
	}
	if got := strings.Join(sets.done(), "; "); got != "resume web by token:ci; abort web by alice" {
		t.Errorf("actions = %s", got)
	}

	var entries []string
	for _, e := range trail.all() {
		if e.Method != "POST" {
			continue // refused reads: alice's of mixed, an anonymous list
		}
		entries = append(entries, fmt.Sprintf("%s %s %s %s %d", e.Principal, e.Action, e.Stack, e.Outcome, e.Status))
		if !strings.HasPrefix(e.Path, "/api/v1/stacksets/") {
			t.Errorf("entry %+v", e)
		}
	}
	want := []string{
		"token:ci-viewer sync StackSet/web denied 403",
		"token:ci sync StackSet/web allowed 200",
		"alice sync StackSet/web allowed 200",
		"alice sync StackSet/mixed denied 403",
		"alice sync StackSet/empty denied 403",
		"anonymous sync StackSet/web unauthenticated 401",
		"token:ci sync StackSet/nope denied 403",
		"admin-token sync StackSet/nope failed 404",
	}
	if !slices.Equal(entries, want) {
		t.Errorf("audit trail:\n%s\nwant:\n%s", strings.Join(entries, "\n"), strings.Join(want, "\n"))
	}
}

// startSetsUI serves the fixture's sets with opts on a loopback port.
func startSetsUI(t *testing.T, opts Options) (string, *fakeStackSets) {
	t.Helper()
	api, sets := setsFixture()
	opts.API, opts.StackSets = api, sets
	_, base := startWith(t, opts)
	return base, sets
}

// TestUIStackSets: the list and a set's page: generators, steps with
// their stacks linked, the halted banner with Resume and Abort, which
// post and come back to the page.
func TestUIStackSets(t *testing.T) {
	base, sets := startSetsUI(t, Options{})
	page := getPage(t, base+"/stacksets", http.StatusOK)
	webtest.WantContains(t, page, `<a href="/stacksets" aria-current="page">Stack sets</a>`,
		`href="/stacksets/web"`, `href="/stacksets/mixed"`, `href="/stacksets/empty"`,
		`<span class="state rollout-halted">Halted</span>`, "step 2 of 2", "1 failing", "3 sets")

	page = getPage(t, base+"/stacksets/web", http.StatusOK)
	webtest.WantContains(t, page,
		// The generator's output, its error escaped.
		"git directories", "https://github.com/acme/envs.git", "<code>envs/dev</code>, <code>envs/prod</code>",
		"git fetch: &lt;connection reset&gt;", `<time datetime="2025-03-01T12:00:00Z">`,
		// The steps, the current one marked, with their stacks.
		"<code>env=dev</code>", "<code>env=prod</code>", `2 <span class="tag">current</span>`,
		`<a href="/stacks/web-dev">web-dev</a>`, `<a href="/stacks/web-prod">web-prod</a>`,
		`<span class="state rollout-failed">Failed</span>`, `<span class="state rollout-waiting">Waiting</span>`,
		`title="`+setCommitNew+`">`+setCommitNew[:7], `title="`+setCommitOld+`">`+setCommitOld[:7],
		// The banner, with both actions.
		`Rollout halted by <a href="/stacks/web-prod">web-prod</a>`, `action="/stacksets/web/resume"`, `action="/stacksets/web/abort"`)
	webtest.WantContains(t, getPage(t, base+"/stacksets/mixed", http.StatusOK), "no rollingSync strategy")
	getPage(t, base+"/stacksets/nope", http.StatusNotFound)

	resp, _ := fetch(t, http.MethodPost, base+"/stacksets/web/resume", http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site resume = %d", resp.StatusCode)
	}
	resp, _ = fetch(t, http.MethodPost, base+"/stacksets/web/abort", http.Header{"Sec-Fetch-Site": {"same-origin"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/stacksets/web" {
		t.Errorf("abort from the page = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	sets.err = fmt.Errorf("nothing halted: %w", ErrRolloutState)
	if resp, body := fetch(t, http.MethodPost, base+"/stacksets/web/resume", nil); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Not resumed") {
		t.Errorf("resume that cannot = %d", resp.StatusCode)
	}
	if got := sets.done(); fmt.Sprint(got) != "[abort web by anonymous]" {
		t.Errorf("actions = %v", got)
	}
}

// TestUIStackSetPermissions: a viewer who may not sync the set's
// stacks sees Resume and Abort disabled, with the reason; alice, who
// may, gets the forms; a set she may not read is refused.
func TestUIStackSetPermissions(t *testing.T) {
	base, _ := startSetsUI(t, Options{Access: setsAccess(), ReadRequiresToken: true})
	resp, page := fetch(t, "GET", base+"/stacksets/web", bearer(viewerToken))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("viewer: %d", resp.StatusCode)
	}
	webtest.WantContains(t, page, `<button type="button" disabled title="token &#34;ci-viewer&#34; may not sync stack web-dev">Resume</button>`,
		"needs a role with sync on every stack of the set")
	webtest.WantLacks(t, page, `action="/stacksets/web/resume"`)

	alice := http.Header{"Cookie": {sessionCookie + "=" + aliceCookie}}
	_, page = fetch(t, "GET", base+"/stacksets/web", alice)
	webtest.WantContains(t, page, `action="/stacksets/web/resume"`, `action="/stacksets/web/abort"`)
	webtest.WantLacks(t, page, "old-web")
	if resp, _ := fetch(t, "GET", base+"/stacksets/mixed", alice); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice's page of mixed = %d", resp.StatusCode)
	}
	_, page = fetch(t, "GET", base+"/stacksets", alice)
	webtest.WantContains(t, page, `href="/stacksets/web"`, "1 more that your roles do not let you read")
	webtest.WantLacks(t, page, `href="/stacksets/mixed"`)
}

// TestStackOwnerShown: a generated stack names its set, linked, in the
// list, on its page and in the summaries.
func TestStackOwnerShown(t *testing.T) {
	base, _ := startSetsUI(t, Options{})
	owner := `<a class="tag owner" href="/stacksets/web" title="Generated by this StackSet">StackSet/web</a>`
	webtest.WantContains(t, getPage(t, base+"/", http.StatusOK), owner)
	webtest.WantContains(t, getPage(t, base+"/stacks/web-dev", http.StatusOK), "<dt>Owner</dt>", owner)
	_, body := send(t, "GET", base+"/api/v1/stacks?view=summary", nil, "")
	webtest.WantContains(t, string(body), `"owner":"StackSet/web"`)
	if got := view.SubjectPath("StackSet/web"); got != "/stacksets/web" {
		t.Errorf("SubjectPath = %s", got)
	}
}

// TestStackSetActWithoutRead: a token that may sync a set's stacks but
// not read them resumes its rollout, and is not shown the rollout.
func TestStackSetActWithoutRead(t *testing.T) {
	api, sets := setsFixture()
	fa := setsAccess()
	fa.tokens["ops-token-secret"] = model.Principal{Kind: model.PrincipalToken, Name: "ops"}
	fa.grants["ops"] = []grant{{access.ActionSync, "web-*"}}
	_, base := startWith(t, Options{API: api, StackSets: sets, Access: fa, ReadRequiresToken: true})
	code, v := callWith(t, "POST", base+"/api/v1/stacksets/web/resume", bearer("ops-token-secret"), "")
	if _, shown := v["rollout"]; code != http.StatusOK || shown {
		t.Errorf("resume = %d %v", code, v)
	}
	if code, _ := callWith(t, "GET", base+"/api/v1/stacksets/web", bearer("ops-token-secret"), ""); code != http.StatusForbidden {
		t.Errorf("read = %d", code)
	}
}
