package gitwatch

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// fakeGitHub plays GitHub Enterprise at one address: the REST API's
// POST /api/v3/app/installations/{id}/access_tokens, checked against
// GitHub's documentation (a JWT signed RS256 by the app's key, issued by
// the app id, at most ten minutes long; the Accept header), and Git over
// smart HTTP for user x-access-token with a token it issued.
type fakeGitHub struct {
	*httptest.Server
	key     *rsa.PrivateKey
	mu      sync.Mutex
	tokens  map[string]bool
	issued  int
	life    time.Duration // of the tokens it issues
	refused []string      // why requests were refused
}

func newFakeGitHub(t *testing.T, root string) *fakeGitHub {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGitHub{key: key, tokens: map[string]bool{}, life: time.Hour}
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Stderr: io.Discard,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=true", "GIT_CONFIG_GLOBAL=/dev/null"}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if r.URL.Path == "/api/v3/app/installations/4242/access_tokens" {
			if why := g.checkJWT(r); why != "" {
				g.refused = append(g.refused, why)
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"message":"A JSON web token could not be decoded"}`)
				return
			}
			g.issued++
			tok := fmt.Sprintf("ghs_token%d", g.issued)
			g.tokens[tok] = true
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": time.Now().Add(g.life).UTC().Format(time.RFC3339)})
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != "x-access-token" || !g.tokens[p] {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

// checkJWT says what is wrong with r's app JWT, or "".
func (g *fakeGitHub) checkJWT(r *http.Request) string {
	if r.Method != http.MethodPost || r.Header.Get("Accept") != "application/vnd.github+json" {
		return "method or Accept header"
	}
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	parts := strings.Split(jwt, ".")
	if !ok || len(parts) != 3 {
		return "no bearer JWT"
	}
	enc := base64.RawURLEncoding
	sig, err := enc.DecodeString(parts[2])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, digest[:], sig) != nil {
		return "bad signature"
	}
	head, _ := enc.DecodeString(parts[0])
	body, _ := enc.DecodeString(parts[1])
	var h struct{ Alg string }
	var c struct {
		Iat, Exp int64
		Iss      string
	}
	if json.Unmarshal(head, &h) != nil || h.Alg != "RS256" || json.Unmarshal(body, &c) != nil {
		return "header or claims"
	}
	now := time.Now().Unix()
	if c.Iss != "17" || c.Iat > now || c.Exp <= now || c.Exp-c.Iat > 600 {
		return fmt.Sprintf("claims %+v", c)
	}
	return ""
}

func (g *fakeGitHub) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(g.key)}))
}

// TestGitHubApp: a GitHub App's credentials are exchanged for an
// installation token, which is reused until shortly before it expires.
func TestGitHubApp(t *testing.T) {
	fx := sharedFixture(t)
	g := newFakeGitHub(t, fx.root)
	f := New(Options{Timeout: time.Minute})
	ctx := context.Background()
	app := &spec.GitHubApp{AppID: "17", InstallationID: "4242", PrivateKey: g.pem()}
	src := model.GitSource{URL: g.URL + "/repo", Ref: "main", Auth: &model.GitAuth{GitHubApp: app}}
	for range 3 {
		if got, err := f.Resolve(ctx, src); err != nil || got != fx.c3 {
			t.Fatalf("Resolve: %s, %v (refused: %v)", got, err, g.refused)
		}
		f.Forget(src.URL) // ask the remote each time
	}
	if g.issued != 1 {
		t.Fatalf("%d tokens for 3 resolves within an hour, want 1", g.issued)
	}

	// A token about to expire is exchanged anew.
	g.life = 2 * time.Minute
	f2 := New(Options{Timeout: time.Minute})
	for range 2 {
		if _, err := f2.Resolve(ctx, src); err != nil {
			t.Fatal(err)
		}
		f2.Forget(src.URL)
	}
	if g.issued != 3 {
		t.Fatalf("%d tokens in all, want 3: one more per resolve once a token has less than five minutes", g.issued)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)}))
	bad := model.GitSource{URL: src.URL, Ref: "main", Auth: &model.GitAuth{GitHubApp: &spec.GitHubApp{AppID: "17", InstallationID: "4242", PrivateKey: otherPEM}}}
	_, err := New(Options{Timeout: time.Minute}).Resolve(ctx, bad)
	noLeak(t, err, otherPEM, "PRIVATE KEY", "ghs_")
	if !strings.Contains(err.Error(), "401") {
		t.Errorf("error %v", err)
	}
}
