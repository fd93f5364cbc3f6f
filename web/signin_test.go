package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
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

func (f *fakeSignIn) Finish(_ context.Context, q url.Values, flow string) (model.Principal, string, string, error) {
	switch {
	case q.Get("error") != "":
		return anonymous, "", "", fmt.Errorf("the provider refused: %s: %w", q.Get("error"), access.ErrUnauthenticated)
	case q.Get("state") != "st" || !strings.HasPrefix(flow, "flow-"):
		return anonymous, "", "", fmt.Errorf("state does not match the flow cookie: %w", access.ErrUnauthenticated)
	}
	alice := model.Principal{Kind: model.PrincipalUser, Name: "alice", Subject: "sub-1", Groups: []string{"dev", "ops"}}
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
		if e.Action != auditSignIn || e.Outcome != model.AuditUnauthenticated || e.Status != cases[i].status || e.Reason == "" {
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

// TestCLIRedirect: /auth/cli sends a session to the loopback port of
// `stackd login` only, with a state that needs no escaping.
func TestCLIRedirect(t *testing.T) {
	cases := []struct{ port, state, want, err string }{
		{"8085", "abcdEFGH-_09", "http://127.0.0.1:8085/callback?state=abcdEFGH-_09", ""},
		{"1024", "12345678", "http://127.0.0.1:1024/callback?state=12345678", ""},
		{"65535", strings.Repeat("s", 128), "http://127.0.0.1:65535/callback?state=" + strings.Repeat("s", 128), ""},
		{"", "abcdefgh", "", "not a port"},
		{"1023", "abcdefgh", "", "not a port"},
		{"65536", "abcdefgh", "", "not a port"},
		{"0", "abcdefgh", "", "not a port"},
		{"-8085", "abcdefgh", "", "not a port"},
		{"+8085", "abcdefgh", "", "not a port"},
		{"08085", "abcdefgh", "", "not a port"},
		{"8085@evil.example", "abcdefgh", "", "not a port"},
		{"80/x", "abcdefgh", "", "not a port"},
		{"8085", "", "", "state"},
		{"8085", "short", "", "state"},
		{"8085", strings.Repeat("s", 129), "", "state"},
		{"8085", "abcdefgh&token=x", "", "state"},
		{"8085", "abcd efgh", "", "state"},
		{"8085", "abcdefgh/../x", "", "state"},
		{"8085", "abcdéfgh", "", "state"},
	}
	for _, c := range cases {
		got, err := cliRedirect(c.port, c.state)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("cliRedirect(%q, %q) = %q, %v; want %q", c.port, c.state, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || got != ""):
			t.Errorf("cliRedirect(%q, %q) = %q, %v; want an error saying %q", c.port, c.state, got, err, c.err)
		}
	}
}

// TestCLILogin: /auth/cli sends a browser without a session to sign in
// and back; with one, to the CLI's loopback callback with the state and
// a session, recorded as a sign-in via the CLI; a bad port is refused
// before any sign-in.
func TestCLILogin(t *testing.T) {
	trail := &memAudit{}
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), SignIn: &fakeSignIn{}, Audit: trail,
		ReadRequiresToken: true})
	const path = "/auth/cli?port=8085&state=abcdefgh"

	resp, _ := fetch(t, "GET", base+path, nil)
	if resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/auth/login?return=%2Fauth%2Fcli%3Fport%3D8085%26state%3Dabcdefgh" {
		t.Errorf("without a session: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	alice := http.Header{"Cookie": {sessionCookie + "=" + aliceCookie}}
	resp, _ = fetch(t, "GET", base+path, alice)
	want := "http://127.0.0.1:8085/callback?state=abcdefgh&token=" + url.QueryEscape(aliceCookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("with a session: %d to %q, want %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	resp, _ = fetch(t, "GET", base+"/auth/cli?port=80&state=abcdefgh", alice)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Errorf("port 80: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var got []string
	for _, e := range trail.all() {
		got = append(got, e.Action+" "+e.Outcome+" "+e.Principal.Name+" "+e.Path+" "+e.Reason)
	}
	wantTrail := "sign-in allowed alice /auth/cli via the CLI (stackd login)|sign-in unauthenticated  /auth/cli stackd login: port \"80\" is not a port from 1024 to 65535"
	if strings.Join(got, "|") != wantTrail {
		t.Errorf("audit trail:\n%s\nwant\n%s", strings.Join(got, "|"), wantTrail)
	}
	for _, e := range trail.all() {
		if strings.Contains(fmt.Sprint(e), aliceCookie) {
			t.Errorf("the trail holds the session: %+v", e)
		}
	}
}
