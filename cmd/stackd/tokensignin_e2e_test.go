package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2ETokenSignInChromium: a daemon with a roles file and no OpenID
// provider. In headless Chromium, the stack page's disabled Sync links
// to the sign-in form; a wrong token is refused there, the operator
// token ci signs in, and the page then names the token and its Sync
// runs the stack, which the audit trail records as token:ci's. Signed
// out and in again with the viewer token dashboards, Sync is disabled,
// and a sync posted anyway is refused and recorded. No token is in the
// daemon's logs, and no script reads the session.
func TestE2ETokenSignInChromium(t *testing.T) {
	t.Parallel()
	chromium := tool(t, "chromium")
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	authFile := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(authFile, []byte(rolesFile(true)), 0o600); err != nil {
		t.Fatal(err)
	}
	config := "stacks:\n" + strings.Replace(stackYAML("app", r, pathConfig(filepath.Join(outDir(t), "note.txt"))),
		"resyncFrequencySeconds: 1", "resyncFrequencySeconds: 600", 1)
	in := startDaemonWith(t, config, "", func(f *runFlags) { f.authFile, f.minResync = authFile, time.Minute })
	in.waitStack("app", "first deploy", time.Minute, isReady)

	b := startBrowser(t, chromium)
	b.open(in.url + "/stacks/app")
	b.wantText("Sign in", "sign in to sync")
	if b.must(`document.querySelector('form[action="/stacks/app/sync"]') === null`) != "true" {
		t.Fatal("an anonymous browser gets a Sync button")
	}
	b.click("a.why")
	if p := b.path(); p != "/auth/signin?return=%2Fstacks%2Fapp" {
		t.Fatalf("the hint leads to %s", p)
	}
	screenshot(t, chromium, in.url+"/auth/signin", "e2e-token-signin.png")

	const wrong = "wrong-0123456789abcdef0123456789abcdef"
	signIn := func(token string) {
		t.Helper()
		b.must(`document.querySelector('#token').value = ` + strconv.Quote(token))
		b.click(`#token-signin button[type="submit"]`)
	}
	signIn(wrong)
	b.wantText("The token was not accepted: unknown or revoked API token")
	if b.path() != "/auth/signin" || strings.Contains(b.html(), wrong) || b.must(`document.querySelector('#token').value`) != "" {
		t.Fatalf("the refused sign-in's page (%s) shows the token or is elsewhere", b.path())
	}

	signIn(ciToken)
	if p := b.path(); p != "/stacks/app" {
		t.Fatalf("the sign-in returned to %s:\n%s", p, b.text())
	}
	b.wantText("Token ci", "Sign out")
	if cookies := b.must("document.cookie"); strings.Contains(cookies, "stackd_session") {
		t.Errorf("a script reads the session: %q", cookies)
	}
	b.click(`form[action="/stacks/app/sync"] button[type="submit"]`)
	if p := b.path(); p != "/stacks/app" {
		t.Fatalf("the sync led to %s:\n%s", p, b.text())
	}
	in.waitStack("app", "the sync from the browser", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.Name == "app-2"
	})

	// The viewer token: Sync disabled, and refused when posted anyway.
	b.click(`#who button[type="submit"]`)
	b.wantText("Sign in")
	b.open(in.url + "/auth/signin?return=%2Fstacks%2Fapp")
	signIn(dashboardToken)
	b.wantText("Token dashboards", "needs a role with sync on this stack")
	b.act(func() {
		b.must(`(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/stacks/app/sync";
			document.body.appendChild(f); f.submit() })()`)
	})
	b.wantText("Not allowed", `token "dashboards" (roles: viewer) may not sync stack app`)
	time.Sleep(300 * time.Millisecond)
	if n := len(in.updates("app")); n != 2 {
		t.Errorf("the viewer's refused sync ran an update: %d updates", n)
	}

	var signedIn []string
	var failed, synced, refused, signedOut bool
	for _, e := range in.audit("?limit=100") {
		who := e.Principal.String()
		switch {
		case e.Action == "sign-in" && e.Outcome == model.AuditAllowed && e.Path == "/auth/signin":
			signedIn = append(signedIn, who)
		case e.Action == "sign-in" && e.Outcome == model.AuditUnauthenticated && strings.Contains(e.Reason, "unknown or revoked"):
			failed = true
		case e.Action == access.ActionSync && e.Stack == "app" && e.Outcome == model.AuditAllowed && who == "token:ci" && e.Path == "/stacks/app/sync":
			synced = true
		case e.Action == access.ActionSync && e.Outcome == model.AuditDenied && who == "token:dashboards" && e.Status == http.StatusForbidden:
			refused = true
		case e.Action == "sign-out" && who == "token:ci":
			signedOut = true
		}
	}
	if strings.Join(signedIn, " ") != "token:dashboards token:ci" || !failed || !synced || !refused || !signedOut {
		t.Errorf("the audit trail: sign-ins %q, failed %v, sync %v, refusal %v, sign-out %v\n%+v",
			signedIn, failed, synced, refused, signedOut, in.audit("?limit=100"))
	}
	for _, tok := range []string{wrong, ciToken, dashboardToken} {
		if strings.Contains(in.logs.String(), tok) {
			t.Errorf("the daemon's logs hold a token given to the form")
		}
	}
}
