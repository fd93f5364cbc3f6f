package gitwatch

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/stackd/stackd/daemon/model"
)

func TestBasicAuth(t *testing.T) {
	fx := sharedFixture(t)
	srv := newGitServer(t, fx.root, token)
	var logs logBuf
	f := New(Options{Logger: newLogger(&logs), Timeout: time.Minute})
	ctx := context.Background()
	good := model.GitSource{URL: srv.repoURL(), Ref: "main", Auth: &model.GitAuth{Password: token}}

	got, err := f.Resolve(ctx, good)
	if err != nil || got != fx.c3 {
		t.Fatalf("right token: %s, %v", got, err)
	}
	dir := filepath.Join(t.TempDir(), "w")
	checkout(t, f, good, fx.c3, dir)
	assertAt(t, dir, fx.c3, "three")
	if cfg := readFile(t, filepath.Join(dir, ".git", "config")); strings.Contains(cfg, token) {
		t.Fatal(".git/config holds the token")
	}

	wrong := "tok-WRONG-SENTINEL-77"
	failures := map[string]model.GitSource{
		"wrong token":               {URL: srv.repoURL(), Ref: "main", Auth: &model.GitAuth{Password: wrong}},
		"no token":                  {URL: srv.repoURL(), Ref: "main"},
		"unknown ref":               {URL: srv.repoURL(), Ref: "nope", Auth: &model.GitAuth{Password: token}},
		"unreachable":               {URL: "http://" + closedAddr(t) + "/repo", Ref: "main", Auth: &model.GitAuth{Password: token}},
		"token in url, unreachable": {URL: "http://git:" + token + "@" + closedAddr(t) + "/repo", Ref: "main"},
		"token as url user":         {URL: "http://" + token + "@" + closedAddr(t) + "/repo", Ref: "main"},
		"token in url, unknown ref": {URL: strings.Replace(srv.repoURL(), "://", "://git:"+token+"@", 1), Ref: "nope"},
	}
	for name, src := range failures {
		_, err := f.Resolve(ctx, src)
		noLeak(t, err, token, wrong)
		t.Logf("%s: %v", name, err)
		_, err = f.Checkout(ctx, src, fx.c3, filepath.Join(t.TempDir(), "x"))
		noLeak(t, err, token, wrong)
	}
	bearer := good
	bearer.Auth = &model.GitAuth{BearerToken: token}
	if got, err := f.Resolve(ctx, bearer); err != nil || got != fx.c3 {
		t.Fatalf("bearer token: %s, %v", got, err)
	}
	_, err = f.Resolve(ctx, model.GitSource{URL: srv.repoURL(), Ref: "main", Auth: &model.GitAuth{BearerToken: wrong}})
	if err == nil {
		t.Fatal("a wrong bearer token was accepted")
	}
	noLeak(t, err, token, wrong)
	_, err = f.Resolve(ctx, failures["wrong token"])
	if !strings.Contains(err.Error(), "gitwatch: ls-remote "+srv.repoURL()) {
		t.Errorf("want context with the url: %v", err)
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), wrong) {
		t.Fatal("logs leak a token")
	}
}

func TestPlainHTTPCredentials(t *testing.T) {
	ctx := context.Background()
	// TEST-NET-1: never contacted, the refusal comes first.
	src := model.GitSource{URL: "http://192.0.2.1/org/repo.git", Ref: "main", Auth: &model.GitAuth{Password: token}}
	// RemoteCall hears of every call to the remote as it starts: none may.
	var mu sync.Mutex
	var calls []string
	f := New(Options{RemoteCall: func(op string) { mu.Lock(); calls = append(calls, op); mu.Unlock() }})
	_, err := f.Resolve(ctx, src)
	if err == nil || !strings.Contains(err.Error(), "plain http") || !strings.Contains(err.Error(), "AllowPlainHTTPAuth") {
		t.Fatalf("want a plain-http refusal, got %v", err)
	}
	noLeak(t, err, token)
	_, err = f.Checkout(ctx, src, strings.Repeat("a", 40), filepath.Join(t.TempDir(), "w"))
	if err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Fatalf("checkout: want a plain-http refusal, got %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 0 {
		t.Errorf("the refusals called the remote: %v", calls)
	}
	// Opted in, or https, or loopback: accepted.
	a, err := New(Options{AllowPlainHTTPAuth: true}).authFor(src)
	if ba, ok := a.(*githttp.BasicAuth); err != nil || !ok || ba.Username != "git" || ba.Password != token {
		t.Fatalf("AllowPlainHTTPAuth: %T %v", a, err)
	}
	for _, u := range []string{"https://192.0.2.1/r.git", "http://127.0.0.1:1/r", "http://localhost/r", "http://[::1]:8/r"} {
		if _, err := New(Options{}).authFor(model.GitSource{URL: u, Auth: &model.GitAuth{Username: "u", Password: "p"}}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestCredentialKindMismatch(t *testing.T) {
	key := keyPEM(t, newKey(t), "")
	f := New(Options{InsecureIgnoreHostKey: true})
	for _, c := range []struct {
		src  model.GitSource
		want string
	}{
		{model.GitSource{URL: "https://example.com/r.git", Auth: &model.GitAuth{SSHPrivateKey: key}}, "ssh private key cannot be used with an http"},
		{model.GitSource{URL: "git@example.com:org/r.git", Auth: &model.GitAuth{Password: token}}, "password (or token) cannot be used with an ssh url"},
		{model.GitSource{URL: "ssh://git@example.com/r.git", Auth: &model.GitAuth{Username: "u", Password: token}}, "password (or token) cannot be used with an ssh url"},
		{model.GitSource{URL: "file:///tmp/r", Auth: &model.GitAuth{Password: token}}, "take no credentials"},
		{model.GitSource{URL: "ssh://git@example.com/r.git"}, "no ssh agent"},
	} {
		c.src.Ref = "main"
		_, err := f.Resolve(context.Background(), c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", c.src.URL, c.want, err)
		}
		noLeak(t, err, token)
	}
}

func TestScrubber(t *testing.T) {
	src := model.GitSource{
		URL:  "https://user:pa%24s-SENTINEL@host/repo.git",
		Auth: &model.GitAuth{Password: "pw-SENTINEL-1", SSHPassphrase: "pp-SENTINEL-2", SSHPrivateKey: []byte("KEY-SENTINEL-3")},
	}
	sc := newScrubber(src)
	cause := errors.New("dial https://user:pa%24s-SENTINEL@host/repo.git as user:pa$s-SENTINEL: pw-SENTINEL-1 pp-SENTINEL-2 KEY-SENTINEL-3")
	err := sc.errorf(cause, "gitwatch: ls-remote %s", sc.cleanURL)
	if strings.Contains(err.Error(), "SENTINEL") {
		t.Fatalf("leak: %v", err)
	}
	if !errors.Is(err, cause) {
		t.Fatal("scrubbed error does not wrap its cause")
	}
	want := "gitwatch: ls-remote https://host/repo.git: dial https://host/repo.git as ***: *** *** ***"
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
}

func TestSanitizeURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"https://git:tok-SENTINEL@github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"https://tok-SENTINEL@github.com/org/repo", "https://github.com/org/repo"},
		{"http://u:p@127.0.0.1:8080/r?private_token=tok-SENTINEL", "http://127.0.0.1:8080/r?private_token=***"},
		{"ssh://git:secret-SENTINEL@host:2222/org/repo.git", "ssh://git@host:2222/org/repo.git"},
		{"ssh://git@host/org/repo.git", "ssh://git@host/org/repo.git"},
		{"git@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"git:secret-SENTINEL@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"github.com:org/repo.git", "github.com:org/repo.git"},
		{"file:///srv/git/repo", "file:///srv/git/repo"},
		{"/srv/git/repo", "/srv/git/repo"},
		{"git://host/repo", "git://host/repo"},
		{"https://u:p%zz-SENTINEL@host/r", "https://***@host/r"}, // unparsable escape
		{"", ""},
	} {
		if got := SanitizeURL(c.in); got != c.want {
			t.Errorf("SanitizeURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
