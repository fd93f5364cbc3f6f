package web

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

// overrideAPI is fakeAPI that takes overrides of change windows, as the
// daemon does: a reason is required.
type overrideAPI struct {
	*fakeAPI
	mu        sync.Mutex
	overrides []model.WindowOverride
}

func (o *overrideAPI) OverrideWindow(name string, by model.Principal, reason string) (string, error) {
	if _, err := o.Stack(name); err != nil {
		return "", err
	}
	if strings.TrimSpace(reason) == "" {
		return "", daemon.ErrNoReason
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.overrides = append(o.overrides, model.WindowOverride{By: by, Reason: reason})
	return "token-1", nil
}

func (o *overrideAPI) taken() []model.WindowOverride {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]model.WindowOverride(nil), o.overrides...)
}

const oncallToken = "oncall-token-secret"

// windowAccess is newFakeAccess with the token oncall, which may
// override change windows of app.
func windowAccess() *fakeAccess {
	a := newFakeAccess()
	a.tokens[oncallToken] = model.Principal{Kind: model.PrincipalToken, Name: "oncall"}
	a.grants["oncall"] = []grant{{access.ActionRead, ""}, {access.ActionSync, "*"}, {access.ActionOverride, "app"}}
	return a
}

// TestSyncOverrideWindow: a sync's body asks for an override; it needs
// the override action on the stack and a reason, and the audit trail
// records it as an override, with the reason when allowed.
func TestSyncOverrideWindow(t *testing.T) {
	api, trail := &overrideAPI{fakeAPI: twoStacks()}, &memAudit{}
	_, base := startWith(t, Options{API: api, Access: windowAccess(), Audit: trail})
	sync := func(stack, token, body string) (int, map[string]any) {
		return callWith(t, "POST", base+"/api/v1/stacks/"+stack+"/sync", bearer(token), body)
	}
	for _, body := range []string{`{"overrideWindow": "yes"}`, `{"override": true}`, `{"reason": "x"}`, `[`} {
		if code, v := sync("app", oncallToken, body); code != http.StatusBadRequest {
			t.Errorf("body %s: %d %v", body, code, v)
		}
	}
	if code, v := sync("app", operatorToken, `{"overrideWindow": true, "reason": "hotfix"}`); code != http.StatusForbidden ||
		!strings.Contains(v["error"].(string), `may not override stack app`) {
		t.Errorf("ci's override: %d %v", code, v)
	}
	if code, v := sync("db", oncallToken, `{"overrideWindow": true, "reason": "hotfix"}`); code != http.StatusForbidden {
		t.Errorf("oncall's override of db: %d %v", code, v)
	}
	if code, v := sync("app", oncallToken, `{"overrideWindow": true, "reason": " "}`); code != http.StatusBadRequest {
		t.Errorf("an override without a reason: %d %v", code, v)
	}
	if code, v := sync("app", oncallToken, `{"overrideWindow": true, "reason": "hotfix"}`); code != http.StatusAccepted || v["overrideWindow"] != true {
		t.Errorf("oncall's override of app: %d %v", code, v)
	}
	if o := api.taken(); len(o) != 1 || o[0].By.Name != "oncall" || o[0].Reason != "hotfix" {
		t.Errorf("overrides = %+v", o)
	}
	if n, _, _ := api.calls(); n != 0 {
		t.Errorf("%d plain syncs, want none", n)
	}

	var got []string
	for _, e := range trail.all() {
		got = append(got, e.Principal.Name+" "+e.Action+" "+e.Stack+" "+e.Outcome+" "+e.Reason)
	}
	want := []string{
		"oncall sync app failed", "oncall sync app failed", "oncall sync app failed", "oncall sync app failed",
		"ci override app denied overriding change windows: token \"ci\" may not override stack app",
		"oncall override db denied overriding change windows: token \"oncall\" may not override stack db",
		"oncall override app failed an override needs a reason",
		"oncall override app allowed hotfix",
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !strings.HasPrefix(g, w) || (w == "") != (g == "") {
			t.Errorf("audit entry %d = %q, want %q…", i, g, w)
		}
	}

	// A daemon that cannot override says so.
	_, plain := startWith(t, Options{API: twoStacks(), Access: windowAccess(), Audit: &memAudit{}})
	if code, v := callWith(t, "POST", plain+"/api/v1/stacks/app/sync", bearer(oncallToken), `{"overrideWindow": true, "reason": "x"}`); code != http.StatusNotImplemented {
		t.Errorf("override on a daemon without it: %d %v", code, v)
	}
}

// TestUIChangeWindow: a stack that waits for change windows shows until
// when and for which windows, with a form to override them for those
// who may, disabled for the others; the form overrides; the history
// shows who overrode and why.
func TestUIChangeWindow(t *testing.T) {
	api := &overrideAPI{fakeAPI: twoStacks()}
	next := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	api.stacks[0].Status.ChangeWindow = &model.ChangeWindowStatus{Change: "commit", NextOpen: next, Windows: []string{`deny window "freeze"`}}
	api.updates = []model.Update{{ID: "app-2", Stack: "app", Seq: 2, State: model.UpdateSucceeded, Type: model.UpdateUp, Reason: "Sync request",
		WindowOverride: &model.WindowOverride{By: model.Principal{Kind: model.PrincipalToken, Name: "oncall"}, Reason: "INC-7 hotfix"}}}
	_, base := startWith(t, Options{API: api, Access: windowAccess(), Audit: &memAudit{}})

	_, page := fetch(t, "GET", base+"/stacks/app", bearer(oncallToken))
	webtest.WantContains(t, page, "Change window", "the commit waits until", `datetime="2026-11-30T07:00:00Z"`, "deny window &#34;freeze&#34;",
		`<input type="hidden" name="overrideWindow" value="true">`, `name="reason" required`, "Override and sync",
		"change windows overridden by", "oncall", "INC-7 hotfix")
	_, page = fetch(t, "GET", base+"/stacks/app", bearer(operatorToken))
	webtest.WantContains(t, page, "the commit waits until", `disabled title="token &#34;ci&#34; may not override stack app"`)
	webtest.WantLacks(t, page, `name="overrideWindow"`)
	_, page = fetch(t, "GET", base+"/stacks/db", bearer(oncallToken))
	webtest.WantLacks(t, page, "Change window", `name="overrideWindow"`)

	form := http.Header{"Authorization": {"Bearer " + oncallToken}, "Content-Type": {"application/x-www-form-urlencoded"}}
	resp, body := sendNoRedirect(t, base+"/stacks/app/sync", form, "overrideWindow=true&reason=")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "an override needs a reason") {
		t.Errorf("the form without a reason: %d %s", resp.StatusCode, body)
	}
	resp, body = sendNoRedirect(t, base+"/stacks/app/sync", form, "overrideWindow=true&reason=INC-8+rollback")
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the form: %d %s", resp.StatusCode, body)
	}
	if o := api.taken(); len(o) != 1 || o[0].Reason != "INC-8 rollback" || o[0].By.Name != "oncall" {
		t.Errorf("overrides = %+v", o)
	}
}

// sendNoRedirect posts body and does not follow a redirect.
func sendNoRedirect(t *testing.T, url string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}
