package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web"
)

func TestAccessFlagsCheck(t *testing.T) {
	oidc := func(f *accessFlags) {
		f.oidcIssuer, f.oidcClientID, f.oidcRedirectURL = "https://dex.example.com", "stackd", "https://stackd.example.com/auth/callback"
		f.sessionTTL = time.Hour
	}
	for _, c := range []struct {
		name      string
		set       func(*accessFlags)
		clustered bool
		err       string
	}{
		{"nothing", func(*accessFlags) {}, false, ""},
		{"a roles file", func(f *accessFlags) { f.authFile = "roles.yaml" }, true, ""},
		{"sign-in", oidc, false, ""},
		{"behind a path prefix", func(f *accessFlags) { oidc(f); f.oidcRedirectURL = "https://example.com/stackd/auth/callback" }, false, ""},
		{"a client without an issuer", func(f *accessFlags) { f.oidcClientID = "stackd" }, false, "need --oidc-issuer"},
		{"no client ID", func(f *accessFlags) { oidc(f); f.oidcClientID = "" }, false, "--oidc-client-id"},
		{"no redirect URL", func(f *accessFlags) { oidc(f); f.oidcRedirectURL = "" }, false, "--oidc-redirect-url"},
		{"another callback", func(f *accessFlags) { oidc(f); f.oidcRedirectURL = "https://stackd.example.com/callback" }, false, "/auth/callback"},
		{"a relative redirect URL", func(f *accessFlags) { oidc(f); f.oidcRedirectURL = "/auth/callback" }, false, "absolute URL"},
		{"no session lifetime", func(f *accessFlags) { oidc(f); f.sessionTTL = 0 }, false, "--session-ttl"},
		{"a cluster without a shared key", oidc, true, "--session-key-file"},
		{"a cluster with a shared key", func(f *accessFlags) { oidc(f); f.sessionKeyFile = "key" }, true, ""},
	} {
		var f accessFlags
		c.set(&f)
		err := f.check(c.clustered)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
}

// listAudit is an audit trail in memory.
type listAudit struct {
	mu      sync.Mutex
	entries []model.AuditEntry
}

func (l *listAudit) PutAudit(e model.AuditEntry) (model.AuditEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = uint64(len(l.entries) + 1)
	l.entries = append(l.entries, e)
	return e, nil
}

func (l *listAudit) Audit(f audit.Filter) ([]model.AuditEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []model.AuditEntry
	for _, e := range slices.Backward(l.entries) {
		if f.Matches(e) && (f.Before == 0 || e.Seq < f.Before) && len(out) < f.Limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *listAudit) PruneAudit(time.Time) (int, error) { return 0, nil }

// TestAuditCommand: stackd audit prints the trail, filtered, as a table
// or JSON; without the token it shows the 401.
func TestAuditCommand(t *testing.T) {
	trail := &listAudit{}
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, e := range []model.AuditEntry{
		{Time: at, Principal: model.Principal{Kind: model.PrincipalToken, Name: "viewer"}, Action: "sync", Stack: "app",
			Method: "POST", Path: "/api/v1/stacks/app/sync", Status: 403, Outcome: "denied", Remote: "192.0.2.1",
			Reason: `token "viewer" (roles: viewer) may not sync stack app`},
		{Time: at.Add(time.Minute), Principal: model.Principal{Kind: model.PrincipalToken, Name: "ci"}, Action: "sync", Stack: "app",
			Method: "POST", Path: "/api/v1/stacks/app/sync", Status: 202, Outcome: "allowed", Remote: "192.0.2.2"},
		{Time: at.Add(2 * time.Minute), Principal: model.Principal{Kind: model.PrincipalAdmin}, Action: "reload",
			Method: "POST", Path: "/api/v1/reload", Status: 200, Outcome: "allowed"},
	} {
		_, _ = trail.PutAudit(e)
	}
	srv := web.New(web.Options{Addr: "127.0.0.1:0", API: &syncAPI{}, Token: "tok", Audit: trail})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	url := "http://" + srv.Addr()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := stackd(t, "audit", "--server", url, "--api-token-file", tokenFile, "--stack", "app")
	if code != exitOK {
		t.Fatalf("audit: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") ||
		!strings.Contains(lines[1], "2026-11-25 10:01:00") || !strings.Contains(lines[1], "token:ci") || !strings.Contains(lines[1], "allowed") ||
		!strings.Contains(lines[2], "token:viewer") || !strings.Contains(lines[2], "denied") || !strings.Contains(lines[2], "POST /api/v1/stacks/app/sync 403") ||
		!strings.Contains(lines[2], "may not sync stack app") {
		t.Errorf("audit --stack app:\n%s", stdout)
	}
	code, stdout, _ = stackd(t, "audit", "--server", url, "--api-token-file", tokenFile, "--actor", "ci", "--json")
	var out struct{ Entries []model.AuditEntry }
	if err := json.Unmarshal([]byte(stdout), &out); code != exitOK || err != nil || len(out.Entries) != 1 || out.Entries[0].Principal.Name != "ci" {
		t.Errorf("audit --actor ci --json: exit %d, %v\n%s", code, err, stdout)
	}
	if code, stdout, _ := stackd(t, "audit", "--server", url, "--api-token-file", tokenFile, "--limit", "1"); code != exitOK ||
		strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, "admin-token") {
		t.Errorf("audit --limit 1: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := stackd(t, "audit", "--server", url, "--data-dir", t.TempDir()); code != exitFail || !strings.Contains(stderr, "401") {
		t.Errorf("audit without the token: exit %d: %s", code, stderr)
	}
	if code, _, stderr := stackd(t, "audit", "--server", url, "--api-token-file", tokenFile, "--since", "soon"); code != exitFail ||
		!strings.Contains(stderr, "since") {
		t.Errorf("audit --since soon: exit %d: %s", code, stderr)
	}
}

// TestAccessTokenSignIn: the web UI's token sign-in is on whenever there
// is a token to sign in with, the admin token alone included, with a
// session key generated into the data dir; in a cluster only with the
// shared --session-key-file; never with --api-no-token and no roles
// file, where nothing is protected.
func TestAccessTokenSignIn(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, admin string
		set         func(*runFlags)
		want        bool
	}{
		{"the admin token alone", "admin-secret", func(*runFlags) {}, true},
		{"no token and no roles file", "", func(*runFlags) {}, false},
		{"a cluster without a shared key", "admin-secret", func(f *runFlags) { f.etcd = "http://127.0.0.1:2379" }, false},
		{"a cluster with a shared key", "admin-secret", func(f *runFlags) { f.etcd, f.sessionKeyFile = "http://127.0.0.1:2379", key }, true},
	} {
		var f runFlags
		c.set(&f)
		f.sessionTTL = 2 * time.Hour
		dir := t.TempDir()
		s, err := f.newAccess(context.Background(), c.admin, nil, "", dir, nil, log)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		o := s.webOptions(web.Options{})
		s.close()
		if got := o.TokenSignIn != nil; got != c.want || (c.want && o.SessionTTL != 2*time.Hour) {
			t.Errorf("%s: token sign-in %v (session TTL %v), want %v", c.name, got, o.SessionTTL, c.want)
		}
		if (o.Access != nil) != (c.admin != "") {
			t.Errorf("%s: access control %v with admin token %q", c.name, o.Access != nil, c.admin)
		}
		_, err = os.Stat(filepath.Join(dir, "session.key"))
		if generated := err == nil; generated != (c.want && f.sessionKeyFile == "") {
			t.Errorf("%s: session key generated into the data dir: %v", c.name, generated)
		}
		if c.want {
			p, session, err := o.TokenSignIn.TokenSession("admin-secret", time.Hour)
			if got, serr := o.Access.Session(session); err != nil || serr != nil || got.Kind != model.PrincipalAdmin || p.Kind != model.PrincipalAdmin {
				t.Errorf("%s: the admin token's session: %v, %v, %+v", c.name, err, serr, got)
			}
		}
	}
}
