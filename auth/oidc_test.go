package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

const (
	testClientID     = "stackd"
	testClientSecret = "client-secret"
	// The callback is never served: the tests stop at the provider's
	// redirect to it and hand its query to Finish, as web would.
	testRedirectURL = "http://127.0.0.1:9/auth/callback"
)

// testProvider is a real OpenID provider on loopback: zitadel/oidc's op
// package with its example storage and login form, and a user in two
// groups. It records the authorization and token requests it gets.
type testProvider struct {
	issuer   string
	mu       sync.Mutex
	auths    []url.Values // authorization requests' queries
	tokens   []url.Values // token requests' forms
	userinfo int          // requests to the userinfo endpoint
}

func startProvider(t *testing.T) *testProvider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProvider{issuer: "http://" + ln.Addr().String()}
	users := testUsers{"u1": {ID: "u1", Username: "alice", Password: "wonderland", FirstName: "Alice",
		LastName: "Liddell", Email: "alice@example.com", EmailVerified: true},
		// Users whose user names differ from alice's email by case alone:
		// one without an email, one whose email is hers, unverified.
		"u2": {ID: "u2", Username: "Alice@Example.com", Password: "mallory", FirstName: "Mallory"},
		"u3": {ID: "u3", Username: "ALICE@EXAMPLE.COM", Password: "mallory", FirstName: "Mallory",
			Email: "alice@example.com", EmailVerified: false}}
	clients := map[string]*storage.Client{testClientID: storage.WebClient(testClientID, testClientSecret, testRedirectURL)}
	st := &groupsStorage{Storage: storage.NewStorageWithClients(users, clients),
		groups: map[string][]string{"u1": {"platform-admins", "team-a"}}}
	router := exampleop.SetupServer(tp.issuer, st, slog.New(slog.DiscardHandler), false)
	srv := &http.Server{Handler: tp.record(router), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return tp
}

// record keeps the queries of authorization requests and the forms of
// token requests.
func (tp *testProvider) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/auth":
			tp.mu.Lock()
			tp.auths = append(tp.auths, r.URL.Query())
			tp.mu.Unlock()
		case strings.HasSuffix(r.URL.Path, "/userinfo"):
			tp.mu.Lock()
			tp.userinfo++
			tp.mu.Unlock()
		case strings.HasSuffix(r.URL.Path, "/token"):
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			tp.mu.Lock()
			tp.tokens = append(tp.tokens, form)
			tp.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

type testUsers map[string]*storage.User

func (u testUsers) GetUserByID(id string) *storage.User { return u[id] }
func (u testUsers) ExampleClientID() string             { return "service" }
func (u testUsers) GetUserByUsername(name string) *storage.User {
	for _, user := range u {
		if user.Username == name {
			return user
		}
	}
	return nil
}

// groupsStorage adds a groups claim to the example storage's ID tokens
// when the groups scope is asked for, as Dex does, and says
// email_verified: false of an unverified email, which the example
// storage leaves out.
type groupsStorage struct {
	*storage.Storage
	groups map[string][]string // by user ID
}

func (s *groupsStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return groupsClient{c}, nil
}

func (s *groupsStorage) SetUserinfoFromRequest(ctx context.Context, info *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, "groups") {
		info.AppendClaims("groups", s.groups[req.GetSubject()])
	}
	saysUnverified(info)
	return nil
}

func (s *groupsStorage) SetUserinfoFromToken(ctx context.Context, info *zoidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	saysUnverified(info)
	return nil
}

func saysUnverified(info *zoidc.UserInfo) {
	if info.Email != "" && !info.EmailVerified {
		info.AppendClaims("email_verified", false)
	}
}

type groupsClient struct{ op.Client }

func (c groupsClient) IsScopeAllowed(scope string) bool {
	return scope == "groups" || c.Client.IsScopeAllowed(scope)
}

// login drives a browser through the provider: from the authorization
// URL to its login form, the form posted, and the redirect back to the
// callback, whose query it returns.
func (tp *testProvider) login(t *testing.T, authURL, user, password string) url.Values {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), testRedirectURL) {
				return http.ErrUseLastResponse
			}
			return nil
		}}
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("the provider's login page: %s at %s", resp.Status, resp.Request.URL)
	}
	resp, err = browser.PostForm(tp.issuer+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.String(), testRedirectURL) {
		t.Fatalf("after the login form: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	return loc.Query()
}

const testRoles = `
roles:
  operator: {allow: [read, sync], stacks: ["*"]}
bindings:
  - group: platform-admins
    roles: [admin]
  - user: alice@example.com
    roles: [operator]
`

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func newTestAccess(t *testing.T, key []byte) *Access {
	t.Helper()
	dir := t.TempDir()
	path := dir + "/roles.yaml"
	if err := writeFile(path, testRoles); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{File: path, SessionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSignInWithARealProvider(t *testing.T) {
	tp := startProvider(t)
	a := newTestAccess(t, testKey(1))
	s, err := NewSignIn(a, OIDCOptions{IssuerURL: tp.issuer, ClientID: testClientID, ClientSecret: testClientSecret,
		RedirectURL: testRedirectURL, Scopes: []string{"openid", "profile", "email", "groups"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	redirect, flow, err := s.Start("/stacks/app?tab=log")
	if err != nil {
		t.Fatal(err)
	}
	callback := tp.login(t, redirect, "alice", "wonderland")

	p, session, returnTo, err := s.Finish(context.Background(), callback, flow)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Principal{Kind: model.PrincipalUser, Name: "alice@example.com", Subject: "u1", Groups: []string{"platform-admins", "team-a"}}
	if p.Kind != want.Kind || p.Name != want.Name || p.Subject != want.Subject || !slices.Equal(p.Groups, want.Groups) {
		t.Errorf("signed in as %+v, want %+v", p, want)
	}
	if returnTo != "/stacks/app?tab=log" {
		t.Errorf("returnTo = %q", returnTo)
	}
	got, err := a.Session(session)
	if err != nil || got.Name != want.Name || !slices.Equal(got.Groups, want.Groups) {
		t.Errorf("Session(the new session) = %+v, %v", got, err)
	}
	if ok, why := a.Allowed(got, access.ActionReload, nil); !ok {
		t.Errorf("a platform admin may not reload: %s", why)
	}

	// PKCE: the challenge went with the authorization request, and the
	// verifier that hashes to it with the token request.
	tp.mu.Lock()
	auth, tok, userinfo := tp.auths[0], tp.tokens[0], tp.userinfo
	tp.mu.Unlock()
	// This provider keeps the email out of the ID token when it issues
	// an access token too: the name came from its userinfo endpoint.
	if userinfo != 1 {
		t.Errorf("%d userinfo requests, want 1", userinfo)
	}
	if auth.Get("code_challenge_method") != "S256" || auth.Get("code_challenge") == "" {
		t.Errorf("authorization request without PKCE S256: %v", auth)
	}
	sum := sha256.Sum256([]byte(tok.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != auth.Get("code_challenge") {
		t.Errorf("the token request's code_verifier does not match the challenge")
	}
	if auth.Get("nonce") == "" || auth.Get("state") == "" {
		t.Errorf("authorization request without nonce or state: %v", auth)
	}

	// The same callback again is refused, before the provider is asked.
	if _, _, _, err := s.Finish(context.Background(), callback, flow); !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), "already used") {
		t.Errorf("replayed callback: %v", err)
	}

	// A code the provider did not issue is refused by it.
	redirect, flow, _ = s.Start("/")
	state := mustQuery(t, redirect).Get("state")
	_, _, _, err = s.Finish(context.Background(), url.Values{"state": {state}, "code": {"forged-code"}}, flow)
	if !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), "exchange the code") {
		t.Errorf("forged code: %v", err)
	}
}

// TestSignInNamesUsersByTheNameClaimOnly is the regression test of a
// user who got another's roles: without an email, or with one the
// provider says is unverified, the name fell back to preferred_username,
// which matched the binding of user alice@example.com without regard to
// case. Such a sign-in is refused, and a user name that differs from a
// binding's by case alone gets none of its roles.
func TestSignInNamesUsersByTheNameClaimOnly(t *testing.T) {
	tp := startProvider(t)
	a := newTestAccess(t, testKey(1))
	stack := &access.StackRef{Name: "app"}
	signIn := func(nameClaim, user string) (model.Principal, string, error) {
		t.Helper()
		s, err := NewSignIn(a, OIDCOptions{IssuerURL: tp.issuer, ClientID: testClientID, ClientSecret: testClientSecret,
			RedirectURL: testRedirectURL, NameClaim: nameClaim})
		if err != nil {
			t.Fatal(err)
		}
		redirect, flow, err := s.Start("/")
		if err != nil {
			t.Fatal(err)
		}
		p, session, _, err := s.Finish(context.Background(), tp.login(t, redirect, user, "mallory"), flow)
		return p, session, err
	}

	for _, c := range []struct{ user, want string }{
		{"Alice@Example.com", `no "email" claim`},
		{"ALICE@EXAMPLE.COM", `"email" claim is not verified`},
	} {
		p, session, err := signIn("", c.user)
		if err == nil {
			ok, _ := a.Allowed(p, access.ActionSync, stack)
			t.Errorf("%s signed in as %q, allowed to sync: %v", c.user, p.Name, ok)
			continue
		}
		if !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Finish error = %v, want one wrapping ErrUnauthenticated saying %q", c.user, err, c.want)
		}
		if session != "" || p.Kind != model.PrincipalAnonymous {
			t.Errorf("%s: refused with a session or as %+v", c.user, p)
		}
	}

	// Named by user name, Alice@Example.com is a user of her own, not
	// the alice@example.com a binding names.
	p, _, err := signIn("preferred_username", "Alice@Example.com")
	if err != nil || p.Name != "Alice@Example.com" {
		t.Fatalf("sign-in by user name: %+v, %v", p, err)
	}
	if ok, _ := a.Allowed(p, access.ActionSync, stack); ok {
		t.Errorf("user name %q holds the roles bound to user alice@example.com", p.Name)
	}
}

func mustQuery(t *testing.T, s string) url.Values {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// fakeIssuer is an OpenID provider's discovery document, keys and token
// endpoint, whose token endpoint answers with the ID token a test made:
// forged, expired, for another audience. The authorization endpoint is
// never visited.
type fakeIssuer struct {
	*httptest.Server
	key *ecdsa.PrivateKey
	mu  sync.Mutex
	// idToken is what the token endpoint answers; verifier is the
	// code_verifier it was sent.
	idToken, verifier string
	// userinfo is what the userinfo endpoint answers; nil: the subject
	// u1 alone.
	userinfo map[string]any
}

func startFakeIssuer(t *testing.T) *fakeIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": f.URL, "authorization_endpoint": f.URL + "/authorize", "token_endpoint": f.URL + "/token",
			"jwks_uri": f.URL + "/keys", "userinfo_endpoint": f.URL + "/userinfo", "id_token_signing_alg_values_supported": []string{"ES256"},
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /userinfo", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		info := f.userinfo
		f.mu.Unlock()
		if info == nil {
			info = map[string]any{"sub": "u1"}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		f.mu.Lock()
		f.verifier = r.PostForm.Get("code_verifier")
		idToken := f.idToken
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		answer := map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600}
		if idToken != "" {
			answer["id_token"] = idToken
		}
		json.NewEncoder(w).Encode(answer)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// claims are a good ID token's, for nonce.
func (f *fakeIssuer) claims(nonce string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": f.URL, "aud": testClientID, "sub": "u1", "email": "alice@example.com",
		"email_verified": true, "groups": "ops", "nonce": nonce, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// sign makes a JWT of claims signed with key under kid.
func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// unsigned makes a JWT with alg none.
func unsigned(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
}

func newFakeSignIn(t *testing.T, f *fakeIssuer, a *Access) *SignIn {
	t.Helper()
	s, err := NewSignIn(a, OIDCOptions{IssuerURL: f.URL, ClientID: testClientID, ClientSecret: testClientSecret,
		RedirectURL: testRedirectURL, HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFinishRefusesBadIDTokens(t *testing.T) {
	f := startFakeIssuer(t)
	a := newTestAccess(t, testKey(1))
	s := newFakeSignIn(t, f, a)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	cases := []struct {
		name string
		// token makes the ID token from a good one's claims; "" wants
		// a sign-in, else the error must say it.
		token func(c map[string]any) string
		want  string
		// userinfo is the userinfo endpoint's answer; nil: the subject.
		userinfo map[string]any
	}{
		{"good", func(c map[string]any) string { return sign(t, jose.ES256, f.key, "k1", c) }, "", nil},
		{"forged (another key)", func(c map[string]any) string { return sign(t, jose.ES256, otherKey, "k1", c) }, "failed to verify signature", nil},
		{"expired", func(c map[string]any) string {
			c["iat"], c["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "token is expired", nil},
		{"not yet valid", func(c map[string]any) string {
			c["nbf"] = time.Now().Add(time.Hour).Unix()
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "before the nbf", nil},
		{"wrong audience", func(c map[string]any) string {
			c["aud"] = "another-client"
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "expected audience", nil},
		{"several audiences, not authorized for us", func(c map[string]any) string {
			c["aud"] = []string{"another-client", testClientID}
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "several audiences", nil},
		{"wrong issuer", func(c map[string]any) string {
			c["iss"] = "https://evil.example"
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "issued by a different provider", nil},
		{"alg none", func(c map[string]any) string { return unsigned(c) }, "malformed jwt", nil},
		{"alg HS256", func(c map[string]any) string { return sign(t, jose.HS256, []byte(strings.Repeat("k", 32)), "k1", c) }, "malformed jwt", nil},
		{"nonce of another sign-in", func(c map[string]any) string {
			c["nonce"] = "another"
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "nonce", nil},
		{"no nonce", func(c map[string]any) string {
			delete(c, "nonce")
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "nonce", nil},
		{"a name too long for a session", func(c map[string]any) string {
			c["email"] = strings.Repeat("a", 300) + "@example.com"
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "longer than 256 bytes", nil},
		{"no email (the name claim), though a user name", func(c map[string]any) string {
			delete(c, "email")
			c["preferred_username"] = "alice@example.com"
			return sign(t, jose.ES256, f.key, "k1", c)
		}, `no "email" claim`, nil},
		{"an empty email", func(c map[string]any) string {
			c["email"] = ""
			return sign(t, jose.ES256, f.key, "k1", c)
		}, `no "email" claim`, nil},
		{"an unverified email", func(c map[string]any) string {
			c["email_verified"] = false
			return sign(t, jose.ES256, f.key, "k1", c)
		}, `"email" claim is not verified`, nil},
		{"the email from userinfo, unverified there", func(c map[string]any) string {
			delete(c, "email") // email_verified: true stays, about no email
			return sign(t, jose.ES256, f.key, "k1", c)
		}, `"email" claim is not verified`, map[string]any{"sub": "u1", "email": "alice@example.com", "email_verified": false}},
		{"the email from userinfo", func(c map[string]any) string {
			delete(c, "email")
			return sign(t, jose.ES256, f.key, "k1", c)
		}, "", map[string]any{"sub": "u1", "email": "alice@example.com", "email_verified": true}},
		{"no ID token", func(map[string]any) string { return "" }, "no ID token", nil},
		{"not a JWT", func(map[string]any) string { return "garbage" }, "malformed jwt", nil},
	}
	for _, c := range cases {
		redirect, flow, err := s.Start("/")
		if err != nil {
			t.Fatal(err)
		}
		q := mustQuery(t, redirect)
		f.mu.Lock()
		f.idToken, f.userinfo = c.token(f.claims(q.Get("nonce"))), c.userinfo
		f.mu.Unlock()
		p, session, _, err := s.Finish(context.Background(), url.Values{"code": {"c"}, "state": {q.Get("state")}}, flow)
		if c.want == "" {
			if err != nil || p.Name != "alice@example.com" || !slices.Equal(p.Groups, []string{"ops"}) || session == "" {
				t.Errorf("%s: Finish = %+v, %v", c.name, p, err)
			}
			f.mu.Lock()
			sum := sha256.Sum256([]byte(f.verifier))
			f.mu.Unlock()
			if base64.RawURLEncoding.EncodeToString(sum[:]) != q.Get("code_challenge") {
				t.Errorf("%s: the code verifier sent does not match the challenge", c.name)
			}
			continue
		}
		if !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Finish error = %v, want one wrapping ErrUnauthenticated saying %q", c.name, err, c.want)
		}
		if session != "" || p.Kind != model.PrincipalAnonymous {
			t.Errorf("%s: refused with a session or as %+v", c.name, p)
		}
	}
}

func TestFinishRefusesBadCallbacks(t *testing.T) {
	f := startFakeIssuer(t)
	key := testKey(1)
	a := newTestAccess(t, key)
	s := newFakeSignIn(t, f, a)
	other := newFakeSignIn(t, f, newTestAccess(t, testKey(2)))

	// start begins a sign-in, and has the provider answer with a good ID
	// token for it.
	start := func() (state, flow string) {
		redirect, flow, err := s.Start("/")
		if err != nil {
			t.Fatal(err)
		}
		q := mustQuery(t, redirect)
		f.mu.Lock()
		f.idToken = sign(t, jose.ES256, f.key, "k1", f.claims(q.Get("nonce")))
		f.mu.Unlock()
		return q.Get("state"), flow
	}
	finish := func(q url.Values, flow string) error {
		_, _, _, err := s.Finish(context.Background(), q, flow)
		return err
	}

	_, secondFlow := start()
	_, otherFlow, _ := other.Start("/")
	state, flow := start()
	session, _ := newSession(a.sessions, model.Principal{Kind: model.PrincipalUser, Name: "x"}, time.Now(), time.Hour)
	expiredFlow, _ := a.flows.sign(flowClaims{State: state, Nonce: "n", Verifier: "v", ReturnTo: "/", Expires: time.Now().Add(-time.Second).Unix()})
	tampered := []byte(flow)
	tampered[len(flow)/2] ^= 2

	cases := []struct {
		name  string
		query url.Values
		flow  string
		want  string
	}{
		{"missing state", url.Values{"code": {"c"}}, flow, "no state"},
		{"state of another sign-in", url.Values{"code": {"c"}, "state": {state + "x"}}, flow, "not this browser's sign-in"},
		{"state with another browser's flow", url.Values{"code": {"c"}, "state": {state}}, secondFlow, "not this browser's sign-in"},
		{"missing code", url.Values{"state": {state}}, flow, "no code"},
		{"missing flow cookie", url.Values{"code": {"c"}, "state": {state}}, "", "flow cookie is missing"},
		{"flow cookie from another key", url.Values{"code": {"c"}, "state": {state}}, otherFlow, "bad signature"},
		{"tampered flow cookie", url.Values{"code": {"c"}, "state": {state}}, string(tampered), "flow cookie"},
		{"a session cookie as flow cookie", url.Values{"code": {"c"}, "state": {state}}, session, "not a cookie of this kind"},
		{"expired flow", url.Values{"code": {"c"}, "state": {state}}, expiredFlow, "took longer than"},
		{"the provider's error", url.Values{"error": {"access_denied"}, "error_description": {"user said no\x00"}, "state": {state}}, flow, "the provider refused: access_denied: user said no"},
	}
	for _, c := range cases {
		err := finish(c.query, c.flow)
		if !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Finish error = %v, want one wrapping ErrUnauthenticated saying %q", c.name, err, c.want)
		}
	}
	// None of those used the state up: the right callback still works,
	// once.
	good := url.Values{"code": {"c"}, "state": {state}}
	if err := finish(good, flow); err != nil {
		t.Fatalf("the good callback after the refusals: %v", err)
	}
	if err := finish(good, flow); !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), "already used") {
		t.Errorf("replayed state: %v", err)
	}
}

func TestStartRefusesOpenRedirects(t *testing.T) {
	f := startFakeIssuer(t)
	s := newFakeSignIn(t, f, newTestAccess(t, testKey(1)))
	for _, bad := range []string{"//evil.example", "https://evil.example", "/\\evil.example", "\\\\evil.example",
		"/\t/evil.example", "/\n/evil.example", "javascript:alert(1)", "evil.example", "http:/evil.example", "/ok/\\..\\"} {
		if _, _, err := s.Start(bad); !errors.Is(err, ErrReturnTo) {
			t.Errorf("Start(%q) = %v, want ErrReturnTo", bad, err)
		}
	}
	for _, good := range []string{"", "/", "/stacks/app", "/stacks/app?tab=log#top", "/a//b"} {
		redirect, flow, err := s.Start(good)
		if err != nil || redirect == "" || flow == "" {
			t.Errorf("Start(%q) = %q, %q, %v", good, redirect, flow, err)
		}
	}
}

func TestStartWhileTheProviderIsDown(t *testing.T) {
	f := startFakeIssuer(t)
	issuer := f.URL
	f.Close()
	s, err := NewSignIn(newTestAccess(t, testKey(1)), OIDCOptions{IssuerURL: issuer, ClientID: testClientID, RedirectURL: testRedirectURL})
	if err != nil {
		t.Fatalf("NewSignIn needs the provider: %v", err)
	}
	if _, _, err := s.Start("/"); err == nil || errors.Is(err, ErrReturnTo) || !strings.Contains(err.Error(), "discover") {
		t.Errorf("Start with the provider down = %v", err)
	}
}

func TestNewSignInChecksOptions(t *testing.T) {
	a := newTestAccess(t, testKey(1))
	good := OIDCOptions{IssuerURL: "https://id.example", ClientID: "c", RedirectURL: "https://stackd.example/auth/callback"}
	bad := []OIDCOptions{
		{ClientID: "c", RedirectURL: good.RedirectURL},
		{IssuerURL: "id.example", ClientID: "c", RedirectURL: good.RedirectURL},
		{IssuerURL: good.IssuerURL, RedirectURL: good.RedirectURL},
		{IssuerURL: good.IssuerURL, ClientID: "c", RedirectURL: "/auth/callback"},
	}
	for _, o := range bad {
		if _, err := NewSignIn(a, o); err == nil {
			t.Errorf("NewSignIn(%+v) took it", o)
		}
	}
	if _, err := NewSignIn(newTestAccess(t, nil), good); err == nil {
		t.Error("NewSignIn without a session key took it")
	}
	s, err := NewSignIn(a, good)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.opts.Scopes, DefaultScopes) || s.SessionTTL() != DefaultSessionTTL || s.opts.NameClaim != "email" || s.opts.GroupsClaim != "groups" {
		t.Errorf("defaults: %+v", s.opts)
	}
	if !a.emailNames.Load() {
		t.Error("users named by email (the default) are not matched as emails")
	}
	s, _ = NewSignIn(a, OIDCOptions{IssuerURL: good.IssuerURL, ClientID: "c", RedirectURL: good.RedirectURL, Scopes: []string{"email"}})
	if !slices.Equal(s.opts.Scopes, []string{"openid", "email"}) {
		t.Errorf("openid not added: %v", s.opts.Scopes)
	}
}

func TestUserName(t *testing.T) {
	cases := []struct {
		claims map[string]any
		claim  string
		want   string
		err    string // "" wants the name
	}{
		{map[string]any{"email": "a@x", "preferred_username": "a", "sub": "1"}, "email", "a@x", ""},
		{map[string]any{"email": "a@x", "email_verified": true, "sub": "1"}, "email", "a@x", ""},
		{map[string]any{"email": "a@x", "email_verified": "true", "sub": "1"}, "email", "a@x", ""},
		// An unverified email is refused; no other claim stands in.
		{map[string]any{"email": "a@x", "email_verified": false, "preferred_username": "a", "sub": "1"}, "email", "", `"email" claim is not verified`},
		{map[string]any{"email": "a@x", "email_verified": "false", "sub": "1"}, "email", "", `"email" claim is not verified`},
		// A missing, empty or non-string claim is refused, whatever else
		// the provider gives.
		{map[string]any{"preferred_username": "a", "sub": "1"}, "email", "", `no "email" claim`},
		{map[string]any{"email": "", "preferred_username": "a", "sub": "1"}, "email", "", `no "email" claim`},
		{map[string]any{"email": " ", "sub": "1"}, "email", "", `no "email" claim`},
		{map[string]any{"sub": "1"}, "email", "", `no "email" claim`},
		{map[string]any{"email": 7, "sub": "1"}, "email", "", `no "email" claim`},
		{map[string]any{"email": "a@x", "email_verified": false, "sub": "1"}, "upn", "", `no "upn" claim`},
		// Another claim is taken as the provider gives it: email_verified
		// is about the email.
		{map[string]any{"upn": "a@corp", "email": "a@x", "sub": "1"}, "upn", "a@corp", ""},
		{map[string]any{"upn": "a@corp", "email_verified": false, "sub": "1"}, "upn", "a@corp", ""},
		{map[string]any{"preferred_username": "Alice", "sub": "1"}, "preferred_username", "Alice", ""},
		{map[string]any{"sub": "1"}, "sub", "1", ""},
	}
	for _, c := range cases {
		got, err := userName(c.claims, c.claim)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("userName(%v, %q) = %q, %v, want %q", c.claims, c.claim, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || got != "") {
			t.Errorf("userName(%v, %q) = %q, %v, want an error saying %q", c.claims, c.claim, got, err, c.err)
		}
	}
}

func TestGroupsOf(t *testing.T) {
	cases := []struct {
		v    any
		want []string
	}{
		{[]any{"b", "a", "b", ""}, []string{"a", "b"}},
		{"ops", []string{"ops"}},
		{[]any{"a", 1, map[string]any{"name": "x"}}, []string{"a"}},
		{42, nil},
		{nil, nil},
	}
	for _, c := range cases {
		if got := groupsOf(c.v); !slices.Equal(got, c.want) {
			t.Errorf("groupsOf(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestTakeStateIsBounded(t *testing.T) {
	s := &SignIn{used: map[string]time.Time{}}
	now := time.Now()
	for i := range maxUsedStates + 10 {
		if !s.takeState(string(rune(i+1000)), now.Add(FlowTTL), now) {
			t.Fatalf("state %d refused", i)
		}
	}
	if len(s.used) > maxUsedStates {
		t.Errorf("%d states kept, more than %d", len(s.used), maxUsedStates)
	}
	if s.takeState(string(rune(maxUsedStates+1009)), now.Add(FlowTTL), now) {
		t.Error("the newest state was taken twice")
	}
}
