package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2ELoginChromium: `stackd login` prints the server's /auth/cli
// address; headless Chromium opened on it signs bob in at the OpenID
// provider and is sent back to the CLI's loopback callback, which keeps
// the session (mode 0600) and says whom it names. A callback with
// another state is refused and the login keeps waiting. `stackd sync`
// then runs as bob, an operator, and the audit trail names him, for the
// sign-in via the CLI and for the sync. After `stackd logout` the sync
// is refused.
func TestE2ELoginChromium(t *testing.T) {
	chromium := tool(t, "chromium")
	in, tp := startSSODaemon(t, rolesFile(false))
	cfgHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgHome)
	t.Setenv("HOME", t.TempDir())
	noToken := t.TempDir() // a data dir without the daemon's token

	bob := "bob"
	tp.user.Store(&bob)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outR, outW := io.Pipe()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var stderr strings.Builder
		tee := &strings.Builder{}
		code := run(ctx, []string{"login", "--server", in.url + "/", "--open-browser=false"}, io.MultiWriter(outW, tee), &stderr)
		outW.Close()
		done <- result{code, tee.String(), stderr.String()}
	}()
	var signIn string
	lines := bufio.NewScanner(outR)
	for lines.Scan() {
		if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, in.url+"/auth/cli?") {
			signIn = l
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if signIn == "" {
		res := <-done
		t.Fatalf("stackd login printed no sign-in address: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	u, err := url.Parse(signIn)
	if err != nil {
		t.Fatal(err)
	}
	port, state := u.Query().Get("port"), u.Query().Get("state")
	if len(state) < 32 {
		t.Errorf("the state %q is short", state)
	}

	// Another state at the CLI's callback: refused, nothing kept.
	// Its first character changed: "x", or "y" where the state's is "x"
	// (the real state, one time in 64, began with "x").
	other := "x"
	if state[0] == 'x' {
		other = "y"
	}
	forged := "http://127.0.0.1:" + port + "/callback?" + url.Values{"state": {other + state[1:]}, "token": {"s1.forged.sig"}}.Encode()
	resp, err := http.Get(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sessionFile := filepath.Join(cfgHome, "stackd", "session")
	if _, err := os.Stat(sessionFile); resp.StatusCode != http.StatusBadRequest || !os.IsNotExist(err) {
		t.Fatalf("a callback with another state: %d, session file: %v", resp.StatusCode, err)
	}

	dom := chromiumRun(t, chromium, "--dump-dom", signIn)
	if !strings.Contains(dom, "stackd is signed in. You may close this tab.") {
		t.Fatalf("the browser's last page:\n%s", dom)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("stackd login did not end after the sign-in")
	}
	if res.code != exitOK || !strings.Contains(res.stdout, "signed in to "+in.url+" as bob@example.com") {
		t.Fatalf("stackd login: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	fi, err := os.Stat(sessionFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v %v", fi, err)
	}
	var kept map[string]struct{ Session string }
	if data, _ := os.ReadFile(sessionFile); json.Unmarshal(data, &kept) != nil || !strings.HasPrefix(kept[in.url].Session, "s1.") {
		t.Fatalf("session file holds %v, want a session for %s", kept, in.url)
	}

	if code, stdout, stderr := stackd(t, "sync", "app", "--server", in.url, "--data-dir", noToken); code != exitOK ||
		!strings.Contains(stdout, "sync of app requested") {
		t.Fatalf("stackd sync with the session of stackd login: exit %d\n%s%s", code, stdout, stderr)
	}
	var cliSignIn, synced bool
	for _, e := range in.audit("?actor=bob@example.com&limit=50") {
		switch {
		case e.Action == "sign-in" && e.Path == "/auth/cli" && e.Outcome == model.AuditAllowed && e.Principal.Name == "bob@example.com":
			cliSignIn = true
		case e.Action == access.ActionSync && e.Stack == "app" && e.Outcome == model.AuditAllowed &&
			e.Principal.Kind == model.PrincipalUser && e.Principal.Name == "bob@example.com":
			synced = true
		}
	}
	if !cliSignIn || !synced {
		t.Errorf("the audit trail lacks bob's sign-in via the CLI (%v) or his sync (%v): %+v", cliSignIn, synced, in.audit("?limit=50"))
	}
	// A forged session is refused.
	session := kept[in.url].Session
	forgedSession := session[:len(session)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(session, "A")]
	if code, _ := in.as(http.MethodPost, "/api/v1/stacks/app/sync", forgedSession); code != http.StatusUnauthorized {
		t.Errorf("a forged session as a bearer token: %d, want 401", code)
	}

	if code, stdout, stderr := stackd(t, "logout", "--server", in.url); code != exitOK || !strings.Contains(stdout, "signed out of "+in.url) {
		t.Fatalf("stackd logout: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := stackd(t, "sync", "app", "--server", in.url, "--data-dir", noToken); code != exitFail || !strings.Contains(stderr, "401") {
		t.Errorf("stackd sync after logout: exit %d\n%s", code, stderr)
	}
}
