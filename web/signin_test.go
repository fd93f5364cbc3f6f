package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon"
)

// fakeSignIn is an OpenID provider's flow reduced to its checks: the
// state must come back, the flow cookie names the return path, and the
// user is always alice.
type fakeSignIn struct {
	mu      sync.Mutex
	started []string
}

const fakeIssuer = "https://issuer.example/authorize?state=st"

func (f *fakeSignIn) Start(ret string) (string, string, error) {
	if !strings.HasPrefix(ret, "/") {
		return "", "", fmt.Errorf("return path %q is not local", ret)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, ret)
	return fakeIssuer, "flow-" + ret, nil
}

func (f *fakeSignIn) Finish(_ context.Context, q url.Values, flow string) (daemon.Principal, string, string, error) {
	switch {
	case q.Get("error") != "":
		return anonymous, "", "", fmt.Errorf("the provider refused: %s: %w", q.Get("error"), daemon.ErrUnauthenticated)
	case q.Get("state") != "st" || !strings.HasPrefix(flow, "flow-"):
		return anonymous, "", "", fmt.Errorf("state does not match the flow cookie: %w", daemon.ErrUnauthenticated)
	}
	alice := daemon.Principal{Kind: daemon.PrincipalUser, Name: "alice", Subject: "sub-1", Groups: []string{"dev", "ops"}}
	return alice, aliceCookie, strings.TrimPrefix(flow, "flow-"), nil
}

// TestSignInFlow: /auth/login sets the flow cookie and sends the browser
// to the issuer; /auth/callback sets the session cookie, deletes the
// flow cookie and returns where the sign-in started; the session then
// identifies the user; /auth/logout deletes it. Every cookie is
// HttpOnly and SameSite=Lax; the session's path is /.
func TestSignInFlow(t *testing.T) {
	trail := &memAudit{}
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), SignIn: &fakeSignIn{}, Audit: trail,
		ReadRequiresToken: true})

	resp, _ := fetch(t, "GET", base+"/auth/login?return=%2Fstacks%2Fapp", nil)
	flow := cookieNamed(resp, flowCookie)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != fakeIssuer || flow == nil {
		t.Fatalf("login: %d to %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	if flow.Value != "flow-/stacks/app" || !flow.HttpOnly || flow.SameSite != http.SameSiteLaxMode || flow.Path != "/auth/" ||
		flow.MaxAge <= 0 || flow.Secure {
		t.Errorf("flow cookie = %+v", flow)
	}

	resp, _ = fetch(t, "GET", base+"/auth/callback?code=c0de&state=st", http.Header{"Cookie": {flowCookie + "=" + flow.Value}})
	session, cleared := cookieNamed(resp, sessionCookie), cookieNamed(resp, flowCookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/stacks/app" || session == nil {
		t.Fatalf("callback: %d to %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	if session.Value != aliceCookie || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Path != "/" {
		t.Errorf("session cookie = %+v", session)
	}
	if cleared == nil || cleared.MaxAge >= 0 || cleared.Path != "/auth/" {
		t.Errorf("the flow cookie is not deleted: %+v", cleared)
	}
	alice := http.Header{"Cookie": {sessionCookie + "=" + session.Value}}
	if resp, page := fetch(t, "GET", base+"/stacks/app", alice); resp.StatusCode != 200 || !strings.Contains(page, "Signed in as") {
		t.Errorf("the stack page with the session: %d", resp.StatusCode)
	}

	resp, _ = fetch(t, "POST", base+"/auth/logout", alice)
	if c := cookieNamed(resp, sessionCookie); resp.StatusCode != http.StatusSeeOther || c == nil || c.MaxAge >= 0 || c.Path != "/" {
		t.Errorf("logout: %d, cookie %+v", resp.StatusCode, c)
	}
	var got []string
	for _, e := range trail.all() {
		got = append(got, e.Action+" "+e.Outcome+" "+e.Principal.Name+" "+e.Path)
	}
	want := "sign-in allowed alice /auth/callback|sign-out allowed alice /auth/logout"
	if strings.Join(got, "|") != want {
		t.Errorf("audit trail:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	for _, e := range trail.all() {
		if strings.Contains(fmt.Sprint(e), "c0de") || strings.Contains(fmt.Sprint(e), aliceCookie) {
			t.Errorf("the trail holds the code or the cookie: %+v", e)
		}
	}
}

// TestSignInRefusals: an open redirect, a callback without the flow
// cookie, a wrong state, the issuer's error: each a plain page with 400
// or 401, recorded as an unauthenticated sign-in, no session set.
func TestSignInRefusals(t *testing.T) {
	trail := &memAudit{}
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), SignIn: &fakeSignIn{}, Audit: trail})
	flow := http.Header{"Cookie": {flowCookie + "=flow-/"}}
	cases := []struct {
		name   string
		target string
		header http.Header
		status int
		says   string
	}{
		{"open redirect", "/auth/login?return=https://evil.example/", nil, 400, "not a path of this server"},
		{"protocol-relative", "/auth/login?return=//evil.example/", nil, 400, "not a path of this server"},
		{"no flow cookie", "/auth/callback?code=c&state=st", nil, 400, "no sign-in was started in this browser"},
		{"replayed state", "/auth/callback?code=c&state=other", flow, 401, "state does not match"},
		{"issuer's error", "/auth/callback?error=access_denied&state=st", flow, 401, "access_denied"},
	}
	for _, c := range cases {
		resp, page := fetch(t, "GET", base+c.target, c.header)
		if resp.StatusCode != c.status || !strings.Contains(page, c.says) || cookieNamed(resp, sessionCookie) != nil ||
			resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s: %d, cookies %v\n%s", c.name, resp.StatusCode, resp.Cookies(), page)
		}
	}
	entries := trail.all()
	if len(entries) != len(cases) {
		t.Fatalf("%d records, want %d: %+v", len(entries), len(cases), entries)
	}
	for i, e := range entries {
		if e.Action != auditSignIn || e.Outcome != daemon.AuditUnauthenticated || e.Status != cases[i].status || e.Reason == "" {
			t.Errorf("%s: record %+v", cases[i].name, e)
		}
	}
}

// TestSignInOff: without SignIn the sign-in endpoints are not served.
func TestSignInOff(t *testing.T) {
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess()})
	for _, p := range []string{"/auth/login", "/auth/callback"} {
		if resp, _ := fetch(t, "GET", base+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d", p, resp.StatusCode)
		}
	}
}

// TestSecureCookies: cookies are Secure over TLS, behind a proxy that
// says https, and always with SecureCookies.
func TestSecureCookies(t *testing.T) {
	for _, c := range []struct {
		opts   bool
		header http.Header
		want   bool
	}{
		{false, nil, false},
		{false, http.Header{"X-Forwarded-Proto": {"https"}}, true},
		{false, http.Header{"X-Forwarded-Proto": {"HTTPS, http"}}, true},
		{false, http.Header{"X-Forwarded-Proto": {"http"}}, false},
		{true, nil, true},
	} {
		_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), SignIn: &fakeSignIn{}, SecureCookies: c.opts})
		resp, _ := fetch(t, "GET", base+"/auth/login", c.header)
		if flow := cookieNamed(resp, flowCookie); flow == nil || flow.Secure != c.want {
			t.Errorf("SecureCookies %v, %v: %+v", c.opts, c.header, flow)
		}
	}
}
