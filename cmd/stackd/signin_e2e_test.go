package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/stackd/stackd/daemon/model"
)

// testOP is a real OpenID provider on loopback (zitadel/oidc's op
// package with its example storage), whose login page signs in the user
// the test chose at once, so that a headless browser goes through the
// whole flow on redirects alone.
type testOP struct {
	t      *testing.T
	ln     net.Listener
	issuer string
	user   atomic.Pointer[string] // the username the login page signs in
}

// Users of the test provider; each password is the username reversed.
var opUsers = map[string]*storage.User{
	"u1": {ID: "u1", Username: "alice", Password: "ecila", Email: "alice@example.com", EmailVerified: true,
		FirstName: "Alice", LastName: "Liddell"},
	"u2": {ID: "u2", Username: "bob", Password: "bob", Email: "bob@example.com", EmailVerified: true,
		FirstName: "Bob", LastName: "Builder"},
	"u3": {ID: "u3", Username: "carol", Password: "lorac", Email: "carol@example.com", EmailVerified: true,
		FirstName: "Carol", LastName: "Danvers"},
}

// opGroups are the users' groups, in the groups claim when the groups
// scope is asked for, as Dex and Keycloak do.
var opGroups = map[string][]string{"u1": {"readers"}, "u2": {"platform-team", "readers"}, "u3": {"platform-admins"}}

// startTestOP starts a provider whose client stackd (secret
// client-secret) may return to redirectURL.
func startTestOP(t *testing.T, redirectURL string) *testOP {
	t.Helper()
	tp := listenTestOP(t)
	tp.serve(redirectURL)
	return tp
}

// listenTestOP makes a provider that listens, so that its issuer URL is
// known, and answers once serve is called.
func listenTestOP(t *testing.T) *testOP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &testOP{t: t, ln: ln, issuer: "http://" + ln.Addr().String()}
	t.Cleanup(func() { _ = ln.Close() })
	return tp
}

// serve answers with a client stackd (secret client-secret) that may
// return to redirectURL.
func (tp *testOP) serve(redirectURL string) {
	clients := map[string]*storage.Client{"stackd": storage.WebClient("stackd", "client-secret", redirectURL)}
	st := &opStorage{Storage: storage.NewStorageWithClients(opUserStore{}, clients)}
	router := exampleop.SetupServer(tp.issuer, st, slog.New(slog.DiscardHandler), false)
	srv := &http.Server{Handler: tp.autoLogin(router), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(tp.ln) }()
	tp.t.Cleanup(func() { _ = srv.Close() })
}

// autoLogin answers the login page by posting its form for the chosen
// user.
func (tp *testOP) autoLogin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := tp.user.Load()
		if r.Method != http.MethodGet || r.URL.Path != "/login/username" || user == nil {
			next.ServeHTTP(w, r)
			return
		}
		var password string
		for _, u := range opUsers {
			if u.Username == *user {
				password = u.Password
			}
		}
		form := url.Values{"id": {r.URL.Query().Get("authRequestID")}, "username": {*user}, "password": {password}}.Encode()
		post := r.Clone(r.Context())
		post.Method, post.URL.RawQuery = http.MethodPost, ""
		post.Body, post.ContentLength = io.NopCloser(strings.NewReader(form)), int64(len(form))
		post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		next.ServeHTTP(w, post)
	})
}

type opUserStore struct{}

func (opUserStore) GetUserByID(id string) *storage.User { return opUsers[id] }
func (opUserStore) ExampleClientID() string             { return "service" }
func (opUserStore) GetUserByUsername(name string) *storage.User {
	for _, u := range opUsers {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// opStorage adds the groups claim.
type opStorage struct{ *storage.Storage }

func (s *opStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return groupsScope{c}, nil
}

func (s *opStorage) SetUserinfoFromRequest(ctx context.Context, info *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, "groups") {
		info.AppendClaims("groups", opGroups[req.GetSubject()])
	}
	return nil
}

type groupsScope struct{ op.Client }

func (c groupsScope) IsScopeAllowed(scope string) bool {
	return scope == "groups" || c.Client.IsScopeAllowed(scope)
}

// TestE2ESignInChromium: reads need sign-in; headless Chromium asking
// for a stack's page is sent to the OpenID provider and back, signed in;
// the sign-in page offers the provider beside the token form.
// alice, a viewer, sees the stack with its Sync button disabled and the
// reason; bob, an operator through his group, may sync; carol, an admin
// through hers, reads the audit trail, which holds every sign-in.
func TestE2ESignInChromium(t *testing.T) {
	t.Parallel()
	chromium := tool(t, "chromium")
	in, tp := startSSODaemon(t, rolesFile(true))

	if resp, err := noFollow.Get(in.url + "/stacks/app"); err != nil || resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/auth/login?return=%2Fstacks%2Fapp" {
		t.Fatalf("an anonymous browser is not sent to sign in: %v %v", resp, err)
	}
	// The sign-in page offers the provider and the token form.
	dom := chromiumRun(t, chromium, "--dump-dom", in.url+"/auth/signin?return=%2Fstacks%2Fapp")
	for _, want := range []string{`href="/auth/login?return=%2Fstacks%2Fapp">Sign in with your OpenID provider</a>`, `name="token"`} {
		if !strings.Contains(dom, want) {
			t.Fatalf("the sign-in page lacks %q:\n%s", want, dom)
		}
	}
	// A token that reads app only lists app, without the config or the
	// cluster, which are not app's.
	appFile := filepath.Join(t.TempDir(), "app-token")
	if err := os.WriteFile(appFile, []byte(appToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := stackd(t, "status", "--server", in.url, "--api-token-file", appFile); code != exitOK ||
		!strings.Contains(stdout, "app ") || strings.Contains(stdout, "CONFIG SOURCE") {
		t.Errorf("stackd status with a token of app: exit %d\n%s%s", code, stdout, stderr)
	}

	alice := "alice"
	tp.user.Store(&alice)
	dom = chromiumRun(t, chromium, "--dump-dom", in.url+"/stacks/app")
	for _, want := range []string{"Signed in as <strong>alice@example.com</strong>", "(readers)", "Sign out",
		`<button type="button" disabled="" title="user &quot;alice@example.com&quot; (roles: viewer) may not sync stack app">Sync</button>`,
		"needs a role with sync on this stack"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("alice's page lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, `action="/stacks/app/sync"`) {
		t.Error("alice, a viewer, gets a sync button")
	}
	screenshot(t, chromium, in.url+"/stacks/app", "e2e-signed-in-viewer.png")

	bob := "bob"
	tp.user.Store(&bob)
	dom = chromiumRun(t, chromium, "--dump-dom", in.url+"/stacks/app")
	for _, want := range []string{"Signed in as <strong>bob@example.com</strong>", "(platform-team, readers)", `action="/stacks/app/sync"`} {
		if !strings.Contains(dom, want) {
			t.Fatalf("bob's page lacks %q:\n%s", want, dom)
		}
	}
	screenshot(t, chromium, in.url+"/stacks/app", "e2e-signed-in-operator.png")

	// carol, an admin through her group, reads the whole trail.
	carol := "carol"
	tp.user.Store(&carol)
	dom = chromiumRun(t, chromium, "--dump-dom", in.url+"/audit")
	for _, want := range []string{"Audit trail", "Signed in as <strong>carol@example.com</strong>", "alice@example.com", "bob@example.com",
		"GET /auth/callback</code> 303", "outcome-allowed"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("carol's audit page lacks %q:\n%s", want, dom)
		}
	}
	screenshot(t, chromium, in.url+"/audit", "e2e-audit.png")

	var signIns []string
	for _, e := range in.audit("?limit=20") {
		if e.Action == "sign-in" && e.Outcome == model.AuditAllowed {
			signIns = append(signIns, e.Principal.Name)
		}
	}
	if !slices.Contains(signIns, "alice@example.com") || !slices.Contains(signIns, "bob@example.com") {
		t.Errorf("sign-ins in the audit trail: %q", signIns)
	}
}

// noFollow reports redirects instead of following them.
var noFollow = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// screenshot keeps a screenshot of url, signed in afresh as the test
// provider's current user, in the artifacts directory.
func screenshot(t *testing.T, chromium, url, name string) {
	t.Helper()
	screenshotSized(t, chromium, url, name, "1280,900")
}

// screenshotSized is screenshot with a window of size ("width,height").
func screenshotSized(t *testing.T, chromium, url, name, size string) {
	t.Helper()
	dir := os.Getenv("STACKD_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	chromiumRun(t, chromium, "--screenshot="+path, "--window-size="+size, url)
	if png, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("screenshot %s: %v", path, err)
	}
	t.Logf("screenshot of %s: %s", url, path)
}

// startSSODaemon starts a daemon with the stack app, the roles file
// roles, reads behind sign-in, and sign-in at a test OpenID provider,
// which it returns too.
func startSSODaemon(t *testing.T, roles string) (*instance, *testOP) {
	t.Helper()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	addr := freeAddr(t)
	redirect := "http://" + addr + "/auth/callback"
	tp := startTestOP(t, redirect)
	secrets := t.TempDir()
	authFile, secretFile := filepath.Join(secrets, "roles.yaml"), filepath.Join(secrets, "client-secret")
	for path, content := range map[string]string{authFile: roles, secretFile: "client-secret\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := "stacks:\n" + stackYAML("app", r, pathConfig(filepath.Join(outDir(t), "note.txt")))
	in := startDaemonWith(t, config, "", func(f *runFlags) {
		f.listen, f.readToken, f.authFile = addr, true, authFile
		f.oidcIssuer, f.oidcClientID, f.oidcClientSecretFile, f.oidcRedirectURL = tp.issuer, "stackd", secretFile, redirect
		f.oidcNameClaim, f.oidcGroupsClaim, f.oidcScopes, f.sessionTTL = "email", "groups", stringsFlag{"openid", "email", "groups"}, time.Hour
	})
	return in, tp
}
