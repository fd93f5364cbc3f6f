package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

// fakeTokenSignIn signs in the holders of fakeAccess's tokens: the
// session of token T is "session-of-" + T's name, which its Session
// knows.
type fakeTokenSignIn struct {
	*fakeAccess
	mu   sync.Mutex
	ttls []time.Duration
}

func (f *fakeTokenSignIn) TokenSession(tok string, ttl time.Duration) (model.Principal, string, error) {
	f.mu.Lock()
	f.ttls = append(f.ttls, ttl)
	f.mu.Unlock()
	p, err := f.Bearer(tok)
	if err != nil {
		return anonymous, "", err
	}
	return p, "session-of-" + p.String(), nil
}

func newFakeTokenSignIn() *fakeTokenSignIn {
	f := &fakeTokenSignIn{fakeAccess: newFakeAccess()}
	for _, p := range f.tokens {
		f.sessions["session-of-"+p.String()] = p
	}
	return f
}

// tokenSignInServer starts a server that signs in with tokens, reads
// open, and returns its base URL, its audit trail and its logs.
func tokenSignInServer(t *testing.T, tune func(*Options)) (string, *fakeAPI, *memAudit, *syncBuffer, *fakeTokenSignIn) {
	t.Helper()
	trail, logs, api, ts := &memAudit{}, &syncBuffer{}, twoStacks(), newFakeTokenSignIn()
	o := Options{API: api, Access: ts.fakeAccess, TokenSignIn: ts, Audit: trail, SessionTTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if tune != nil {
		tune(&o)
	}
	_, base := startWith(t, o)
	return base, api, trail, logs, ts
}

// signInForm opens the sign-in form returning to ret: the anti-forgery
// cookie and the form's value of it.
func signInForm(t *testing.T, base, ret string) (*http.Cookie, string) {
	t.Helper()
	resp, page := fetch(t, "GET", base+"/auth/signin?"+url.Values{"return": {ret}}.Encode(), nil)
	c := cookieNamed(resp, formCookie)
	m := regexp.MustCompile(`name="form" value="([^"]+)"`).FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || c == nil || m == nil || m[1] != c.Value {
		t.Fatalf("sign-in form: %d, cookie %+v, form value %q\n%s", resp.StatusCode, c, m, page)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != signInPath || c.MaxAge <= 0 {
		t.Errorf("the form cookie = %+v", c)
	}
	webtest.WantContains(t, page, `type="password"`, `action="/auth/signin"`, `method="post"`,
		`name="return" value="`+ret+`"`)
	return c, m[1]
}

// postSignIn posts the form with the token, the form value, and the
// cookie, with the headers a same-origin browser form sends, and more.
func postSignIn(t *testing.T, base string, form url.Values, cookie *http.Cookie, more http.Header) (*http.Response, string) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {base}}
	if cookie != nil {
		h.Set("Cookie", cookie.Name+"="+cookie.Value)
	}
	for k, v := range more {
		h[k] = v
	}
	return sendNoRedirect(t, base+"/auth/signin", h, form.Encode())
}

// TestTokenSignIn: the form signs the holder of a named token in with a
// session cookie (HttpOnly, SameSite=Lax, for the session's lifetime)
// and returns to the page it came from, where the token's name, its
// roles' Sync and Sign out show; the sign-in and the sync are recorded
// as the token's. The token is in no answer, cookie, log or record.
func TestTokenSignIn(t *testing.T) {
	base, api, trail, logs, ts := tokenSignInServer(t, nil)

	_, page := fetch(t, "GET", base+"/stacks/app", nil)
	webtest.WantContains(t, page, `href="/auth/signin?return=%2Fstacks%2Fapp">Sign in</a>`,
		`<a class="why" href="/auth/signin?return=%2Fstacks%2Fapp"`, ">sign in to sync</a>")

	c, form := signInForm(t, base, "/stacks/app")
	resp, body := postSignIn(t, base, url.Values{"token": {operatorToken}, "form": {form}, "return": {"/stacks/app"}}, c, nil)
	session := cookieNamed(resp, sessionCookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/stacks/app" || session == nil {
		t.Fatalf("sign-in: %d to %q, cookies %v\n%s", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies(), body)
	}
	if session.Value != "session-of-token:ci" || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode ||
		session.Path != "/" || session.MaxAge != 3600 {
		t.Errorf("session cookie = %+v", session)
	}
	if ts.ttls[0] != time.Hour {
		t.Errorf("the session was asked for %v, want the session TTL", ts.ttls)
	}
	if used := cookieNamed(resp, formCookie); used == nil || used.MaxAge >= 0 {
		t.Errorf("the form cookie is not deleted: %+v", used)
	}
	ci := http.Header{"Cookie": {sessionCookie + "=" + session.Value}}
	_, page = fetch(t, "GET", base+"/stacks/app", ci)
	webtest.WantContains(t, page, "Token <strong>ci</strong>", `action="/auth/logout"`, `action="/stacks/app/sync"`)

	ci.Set("Sec-Fetch-Site", "same-origin")
	if resp, _ := fetch(t, "POST", base+"/stacks/app/sync", ci); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sync with the token's session: %d", resp.StatusCode)
	}
	if synced, _, _ := api.calls(); synced != 1 {
		t.Fatalf("%d syncs, want 1", synced)
	}
	entries := trail.all()
	ciToken := model.Principal{Kind: model.PrincipalToken, Name: "ci"}
	if len(entries) != 2 || entries[0].Action != auditSignIn || entries[0].Outcome != model.AuditAllowed || entries[0].Principal.String() != "token:ci" ||
		entries[1].Action != access.ActionSync || entries[1].Principal.String() != ciToken.String() || entries[1].Outcome != model.AuditAllowed {
		t.Errorf("audit trail = %+v", entries)
	}

	resp, _ = fetch(t, "POST", base+"/auth/logout", ci)
	if cleared := cookieNamed(resp, sessionCookie); resp.StatusCode != http.StatusSeeOther || cleared == nil || cleared.MaxAge >= 0 {
		t.Errorf("sign-out: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if last := trail.all()[len(trail.all())-1]; last.Action != auditSignOut || last.Principal.String() != "token:ci" {
		t.Errorf("sign-out's record = %+v", last)
	}
	wantNoToken(t, operatorToken, trail, logs, body)
}

// wantNoToken fails when tok is in the audit trail, the logs or one of
// the bodies.
func wantNoToken(t *testing.T, tok string, trail *memAudit, logs *syncBuffer, bodies ...string) {
	t.Helper()
	if strings.Contains(logs.String(), tok) {
		t.Errorf("the logs hold the token:\n%s", logs)
	}
	if strings.Contains(fmt.Sprintf("%+v", trail.all()), tok) {
		t.Errorf("the audit trail holds the token: %+v", trail.all())
	}
	for _, b := range bodies {
		if strings.Contains(b, tok) {
			t.Errorf("an answer holds the token:\n%s", b)
		}
	}
}

// TestTokenSignInRefused: an unknown token, a session's value and an
// empty field get 401 and the form again, empty, with the reason; no
// session cookie; each failure is recorded, without the token.
func TestTokenSignInRefused(t *testing.T) {
	base, _, trail, logs, _ := tokenSignInServer(t, nil)
	const wrong = "wrong-token-guessed-7f3a"
	for _, tok := range []string{wrong, "session-of-token:ci", ""} {
		c, form := signInForm(t, base, "/")
		resp, body := postSignIn(t, base, url.Values{"token": {tok}, "form": {form}}, c, nil)
		if resp.StatusCode != http.StatusUnauthorized || cookieNamed(resp, sessionCookie) != nil {
			t.Errorf("token %q: %d, cookies %v", tok, resp.StatusCode, resp.Cookies())
		}
		webtest.WantContains(t, body, "The token was not accepted: unknown or revoked API token", `name="token" type="password"`)
		if tok != "" {
			wantNoToken(t, tok, trail, logs, body)
		}
	}
	for _, e := range trail.all() {
		if e.Action != auditSignIn || e.Outcome != model.AuditUnauthenticated || e.Status != http.StatusUnauthorized ||
			e.Principal.Kind != model.PrincipalAnonymous || !strings.Contains(e.Reason, "unknown or revoked") {
			t.Errorf("a failed sign-in's record = %+v", e)
		}
	}
	if n := len(trail.all()); n != 3 {
		t.Errorf("%d records of 3 failed sign-ins", n)
	}
}

// TestTokenSignInCSRF: login CSRF, a page elsewhere that posts its own
// token to the form so that its visitor acts as the attacker, is
// refused whether it comes cross-site (Sec-Fetch-Site, Origin) or
// without the form's cookie or its value (a browser that sends neither
// header); so is a cross-site sync with the session the form gave.
func TestTokenSignInCSRF(t *testing.T) {
	base, api, trail, _, _ := tokenSignInServer(t, nil)
	c, form := signInForm(t, base, "/")
	for name, tc := range map[string]struct {
		form   string
		cookie *http.Cookie
		more   http.Header
	}{
		"cross-site":            {form, c, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		"same-site, other port": {form, c, http.Header{"Sec-Fetch-Site": {"same-site"}}},
		"another origin":        {form, c, http.Header{"Sec-Fetch-Site": nil, "Origin": {"https://evil.example"}}},
		"no form cookie":        {form, nil, nil},
		"another form value":    {"attacker-chosen-value", c, nil},
		"no form value":         {"", c, nil},
	} {
		resp, body := postSignIn(t, base, url.Values{"token": {operatorToken}, "form": {tc.form}}, tc.cookie, tc.more)
		if resp.StatusCode != http.StatusForbidden || cookieNamed(resp, sessionCookie) != nil {
			t.Errorf("%s: %d, cookies %v\n%s", name, resp.StatusCode, resp.Cookies(), body)
		}
	}
	for _, e := range trail.all() {
		if e.Outcome == model.AuditAllowed {
			t.Errorf("a forged sign-in is recorded as allowed: %+v", e)
		}
	}

	// The session is used across sites: the sync is refused.
	resp, _ := postSignIn(t, base, url.Values{"token": {operatorToken}, "form": {form}}, c, nil)
	session := cookieNamed(resp, sessionCookie)
	if session == nil {
		t.Fatalf("the genuine sign-in: %d", resp.StatusCode)
	}
	h := http.Header{"Cookie": {sessionCookie + "=" + session.Value}, "Sec-Fetch-Site": {"cross-site"}}
	if resp, _ := fetch(t, "POST", base+"/stacks/app/sync", h); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site sync with the session: %d, want 403", resp.StatusCode)
	}
	if synced, _, _ := api.calls(); synced != 0 {
		t.Errorf("a cross-site form synced %d times", synced)
	}
}

// TestTokenSignInReturnPath: the form returns to paths of this server
// only; anything a browser could read as another host is refused, on the
// form and on its post, and signs nobody in.
func TestTokenSignInReturnPath(t *testing.T) {
	base, _, _, _, _ := tokenSignInServer(t, nil)
	c, form := signInForm(t, base, "/")
	for _, ret := range []string{"https://evil.example/", "//evil.example/", `/\evil.example`, "/\t/evil.example", "evil", "javascript:alert(1)"} {
		if resp, _ := fetch(t, "GET", base+"/auth/signin?"+url.Values{"return": {ret}}.Encode(), nil); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("form returning to %q: %d", ret, resp.StatusCode)
		}
		resp, _ := postSignIn(t, base, url.Values{"token": {operatorToken}, "form": {form}, "return": {ret}}, c, nil)
		if resp.StatusCode != http.StatusBadRequest || cookieNamed(resp, sessionCookie) != nil || resp.Header.Get("Location") != "" {
			t.Errorf("sign-in returning to %q: %d to %q, cookies %v", ret, resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
		}
	}
}

// TestTokenSignInLimit: after signInBurst failures from one address,
// the form refuses even the right token (429, unchecked) until the
// address has waited; the other addresses are not limited.
func TestTokenSignInLimit(t *testing.T) {
	base, _, trail, _, ts := tokenSignInServer(t, nil)
	c, form := signInForm(t, base, "/")
	for i := range signInBurst {
		if resp, _ := postSignIn(t, base, url.Values{"token": {fmt.Sprintf("guess-%d", i)}, "form": {form}}, c, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	checked := len(ts.ttls)
	resp, body := postSignIn(t, base, url.Values{"token": {operatorToken}, "form": {form}}, c, nil)
	if resp.StatusCode != http.StatusTooManyRequests || cookieNamed(resp, sessionCookie) != nil || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right token after %d guesses: %d, cookies %v", signInBurst, resp.StatusCode, resp.Cookies())
	}
	webtest.WantContains(t, body, "Too many failed sign-ins")
	if len(ts.ttls) != checked {
		t.Error("a limited attempt's token was checked")
	}
	if last := trail.all()[len(trail.all())-1]; last.Status != http.StatusTooManyRequests || last.Outcome != model.AuditUnauthenticated {
		t.Errorf("the limited attempt's record = %+v", last)
	}

	var l signInLimits
	now := time.Now()
	a := l.of("192.0.2.1", now)
	for range signInBurst {
		a.allow(now, signInBurst, signInEvery)
	}
	if left, _ := a.left(now, signInBurst, signInEvery); left {
		t.Error("an address has attempts left after the burst")
	}
	if left, _ := l.of("192.0.2.2", now).left(now, signInBurst, signInEvery); !left {
		t.Error("another address is limited")
	}
	if left, _ := l.of("192.0.2.1", now.Add(signInEvery)).left(now.Add(signInEvery), signInBurst, signInEvery); !left {
		t.Error("the address has no attempt after waiting")
	}
}

// TestTokenSignInOnly: with token sign-in and no OpenID provider, a
// browser opening a page it may not read is sent to the form; with a
// provider too, the form offers it.
func TestTokenSignInOnly(t *testing.T) {
	base, _, _, _, _ := tokenSignInServer(t, func(o *Options) { o.ReadRequiresToken = true })
	resp, _ := fetch(t, "GET", base+"/stacks/app", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/auth/signin?return=%2Fstacks%2Fapp" {
		t.Errorf("an anonymous browser: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page := fetch(t, "GET", base+"/auth/signin", nil)
	webtest.WantLacks(t, page, "OpenID provider")

	base, _, _, _, _ = tokenSignInServer(t, func(o *Options) { o.SignIn = &fakeSignIn{} })
	_, page = fetch(t, "GET", base+"/auth/signin?return=%2Fstacks%2Fapp", nil)
	webtest.WantContains(t, page, `href="/auth/login?return=%2Fstacks%2Fapp">Sign in with your OpenID provider</a>`, `name="token"`)
}
