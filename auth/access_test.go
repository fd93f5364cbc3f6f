package auth

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

func testKey(b byte) []byte { return []byte(strings.Repeat(string(rune('a'+b%26)), 32)) }

// writeRoles writes a roles file with a token per name, each the
// SHA-256 of "secret-"+name, and returns its path.
func writeRoles(t *testing.T, dir, extra string, tokens ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("roles: {viewer: {allow: [read]}}\ntokens:\n")
	for _, name := range tokens {
		b.WriteString("  - {name: " + name + ", sha256: " + HashToken("secret-"+name) + ", roles: [viewer]}\n")
	}
	b.WriteString(extra)
	path := filepath.Join(dir, "roles.yaml")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as editors and ConfigMaps replace it
		t.Fatal(err)
	}
	return path
}

func TestBearer(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	path := writeRoles(t, dir, "  - {name: old, sha256: "+HashToken("secret-old")+", roles: [viewer], expires: 2026-11-30T00:00:00Z}\n"+
		"  - {name: later, sha256: "+HashToken("secret-later")+", roles: [viewer], expires: 2027-01-01}\n", "ci")
	a, err := New(Options{AdminToken: "break-glass", File: path, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		token   string
		want    model.Principal
		wantErr string
	}{
		{"break-glass", model.Principal{Kind: model.PrincipalAdmin}, ""},
		{"secret-ci", model.Principal{Kind: model.PrincipalToken, Name: "ci"}, ""},
		{"secret-later", model.Principal{Kind: model.PrincipalToken, Name: "later"}, ""},
		{"secret-old", model.Principal{}, "token old expired at 2026-11-30T00:00:00Z"},
		{"secret-ci ", model.Principal{}, "unknown or revoked API token"},
		{"nope", model.Principal{}, "unknown or revoked API token"},
		{"", model.Principal{}, "empty API token"},
	}
	for _, c := range cases {
		p, err := a.Bearer(c.token)
		if c.wantErr == "" {
			if err != nil || p.Kind != c.want.Kind || p.Name != c.want.Name {
				t.Errorf("Bearer(%q) = %+v, %v; want %+v", c.token, p, err, c.want)
			}
			continue
		}
		if !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("Bearer(%q) error = %v, want one wrapping ErrUnauthenticated saying %q", c.token, err, c.wantErr)
		}
		if c.token != "" && err != nil && strings.Contains(err.Error(), c.token) {
			t.Errorf("Bearer(%q) error quotes the token: %v", c.token, err)
		}
		if p.Kind != model.PrincipalAnonymous {
			t.Errorf("Bearer(%q) refused as %+v, want anonymous", c.token, p)
		}
	}
}

func TestBearerWithoutRolesFile(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Bearer("anything"); !errors.Is(err, access.ErrUnauthenticated) {
		t.Errorf("Bearer without admin token nor roles file = %v", err)
	}
}

func TestRevokedAfterReload(t *testing.T) {
	dir := t.TempDir()
	path := writeRoles(t, dir, "", "ci", "cd")
	a, err := New(Options{File: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Bearer("secret-ci"); err != nil {
		t.Fatal(err)
	}
	writeRoles(t, dir, "", "cd")
	if changed, err := a.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if _, err := a.Bearer("secret-ci"); !errors.Is(err, access.ErrUnauthenticated) {
		t.Errorf("a token removed from the file is still taken: %v", err)
	}
	if _, err := a.Bearer("secret-cd"); err != nil {
		t.Errorf("the remaining token: %v", err)
	}
	// A principal resolved before the reload holds no role after it.
	if ok, _ := a.Allowed(model.Principal{Kind: model.PrincipalToken, Name: "ci"}, access.ActionRead, &access.StackRef{Name: "s"}); ok {
		t.Error("a revoked token's principal still reads")
	}
	// A broken file leaves the policy in force.
	if err := os.WriteFile(path, []byte("tokens: [oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	var perr *PolicyError
	if changed, err := a.Reload(); changed || !errors.As(err, &perr) {
		t.Fatalf("Reload of a broken file = %v, %v", changed, err)
	}
	if _, err := a.Bearer("secret-cd"); err != nil {
		t.Errorf("after a failed reload: %v", err)
	}
	// The file back as it was is reported, once.
	writeRoles(t, dir, "", "cd")
	if changed, err := a.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if changed, err := a.Reload(); changed || err != nil {
		t.Fatalf("Reload of the same file = %v, %v", changed, err)
	}
}

func TestNewRefusesABrokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(path, []byte("roles: {r: {allow: [fly]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{File: path})
	if err == nil || !strings.Contains(err.Error(), path+":1:21: roles.r.allow: unknown action \"fly\"") {
		t.Fatalf("New = %v", err)
	}
	if _, err := New(Options{File: filepath.Join(t.TempDir(), "missing.yaml")}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("New with a missing file = %v", err)
	}
}

func TestWatchReloads(t *testing.T) {
	dir := t.TempDir()
	path := writeRoles(t, dir, "", "ci")
	a, err := New(Options{File: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var outcomes []error
	done, err := a.Watch(ctx, func(err error) {
		mu.Lock()
		outcomes = append(outcomes, err)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	writeRoles(t, dir, "", "cd")
	waitFor("the new token is taken", func() bool { _, err := a.Bearer("secret-cd"); return err == nil })
	if _, err := a.Bearer("secret-ci"); err == nil {
		t.Error("the removed token is still taken")
	}
	// A broken save, whole at once: written in place, a busy machine could
	// hold the test back while the file is empty, which grants nothing,
	// long enough for a reload.
	if err := os.WriteFile(path+".tmp", []byte("tokens: {"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	waitFor("the failed reload is reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcomes) >= 2 && outcomes[len(outcomes)-1] != nil
	})
	if _, err := a.Bearer("secret-cd"); err != nil {
		t.Errorf("a broken file revoked the tokens in force: %v", err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not end with its context")
	}
	mu.Lock()
	defer mu.Unlock()
	if outcomes[0] != nil {
		t.Errorf("first reload reported %v, want nil", outcomes[0])
	}
}

// base64URL is the alphabet of base64url, in the order of the values.
const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestSession(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, err := New(Options{SessionKey: testKey(1), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(Options{SessionKey: testKey(2), Now: clock})
	alice := model.Principal{Kind: model.PrincipalUser, Name: "alice@example.com", Subject: "id1", Groups: []string{"ops"}}
	good, err := newSession(a.sessions, alice, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Session(good)
	if err != nil || p.Name != alice.Name || p.Subject != "id1" || p.Kind != model.PrincipalUser || len(p.Groups) != 1 || p.Groups[0] != "ops" {
		t.Fatalf("Session = %+v, %v", p, err)
	}
	if name, exp, ok := SessionHolder(good); !ok || name != alice.Name || !exp.Equal(now.Add(time.Hour)) {
		t.Errorf("SessionHolder = %q, %v, %v", name, exp, ok)
	}
	if _, _, ok := SessionHolder("0123abcd"); ok {
		t.Error("SessionHolder reads a token as a session")
	}
	// The value `stackd login` stores is sent as a bearer token.
	if p, err := a.Bearer(good); err != nil || p.Name != alice.Name || p.Kind != model.PrincipalUser {
		t.Fatalf("Bearer(session) = %+v, %v", p, err)
	}

	fromOther, _ := newSession(other.sessions, alice, now, time.Hour)
	expired, _ := newSession(a.sessions, alice, now.Add(-2*time.Hour), time.Hour)
	future, _ := newSession(a.sessions, alice, now.Add(time.Hour), time.Hour)
	flow, _ := a.flows.sign(flowClaims{State: "s", Expires: now.Add(time.Hour).Unix()})
	body, sig, _ := strings.Cut(strings.TrimPrefix(good, sessionPrefix), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(body)
	tamperedPayload := sessionPrefix + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), "alice", "admin", 1))) + "." + sig
	badSig := []byte(good)
	badSig[len(badSig)-2] ^= 1
	// The signature's last character holds two unused bits; a value
	// with them set decodes leniently to the same signature.
	unusedBits := []byte(good)
	unusedBits[len(unusedBits)-1] = base64URL[strings.IndexByte(base64URL, good[len(good)-1])|1]
	noName, _ := a.sessions.sign(sessionClaims{Issued: now.Unix(), Expires: now.Add(time.Hour).Unix()})
	notJSON := sessionPrefix + base64.RawURLEncoding.EncodeToString([]byte("{")) + "." + base64.RawURLEncoding.EncodeToString(a.sessions.mac(sessionPrefix+base64.RawURLEncoding.EncodeToString([]byte("{"))))

	cases := []struct{ name, cookie, want string }{
		{"another key", fromOther, "bad signature"},
		{"tampered payload", tamperedPayload, "bad signature"},
		{"tampered signature", string(badSig), "bad signature"},
		{"the signature's unused bits set", string(unusedBits), "bad signature"},
		{"expired", expired, "expired at 2026-12-01T11:00:00Z"},
		{"issued in the future", future, "issued in the future"},
		{"a flow cookie", flow, "not a cookie of this kind"},
		{"no name", noName, "malformed"},
		{"not JSON", notJSON, "malformed"},
		{"empty", "", "not a cookie of this kind"},
		{"no signature", sessionPrefix + body, "malformed"},
		{"only the prefix", sessionPrefix, "malformed"},
		{"another version", "s2." + body + "." + sig, "not a cookie of this kind"},
		{"too long", good + strings.Repeat("A", maxCookie), "not a cookie of this kind"},
	}
	for _, c := range cases {
		p, err := a.Session(c.cookie)
		if !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Session error = %v, want one wrapping ErrUnauthenticated saying %q", c.name, err, c.want)
		}
		if p.Kind != model.PrincipalAnonymous {
			t.Errorf("%s: refused as %+v", c.name, p)
		}
		if c.cookie == "" || !strings.HasPrefix(c.cookie, sessionPrefix) {
			continue
		}
		if p, err := a.Bearer(c.cookie); !errors.Is(err, access.ErrUnauthenticated) || !strings.Contains(err.Error(), c.want) ||
			p.Kind != model.PrincipalAnonymous {
			t.Errorf("%s: Bearer = %+v, %v; want a refusal saying %q", c.name, p, err, c.want)
		}
	}
	noKey, _ := New(Options{})
	if _, err := noKey.Session(good); !errors.Is(err, access.ErrUnauthenticated) {
		t.Errorf("Session without a key = %v", err)
	}
}

func TestLoadSessionKey(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadSessionKey(dir, "")
	if err != nil || len(key) != 32 {
		t.Fatalf("LoadSessionKey = %x, %v", key, err)
	}
	fi, err := os.Stat(filepath.Join(dir, SessionKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session key file: %v, %v", fi, err)
	}
	again, err := LoadSessionKey(dir, "")
	if err != nil || hex.EncodeToString(again) != hex.EncodeToString(key) {
		t.Fatalf("a second load made another key: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	shared := filepath.Join(t.TempDir(), "shared.key")
	os.WriteFile(shared, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	got, err := LoadSessionKey(dir, shared)
	if err != nil || hex.EncodeToString(got) != strings.Repeat("ab", 32) {
		t.Fatalf("LoadSessionKey(--session-key-file) = %x, %v", got, err)
	}
	os.WriteFile(shared, []byte("short"), 0o600)
	if _, err := LoadSessionKey(dir, shared); err == nil || !strings.Contains(err.Error(), "--session-key-file") {
		t.Errorf("a bad key file = %v", err)
	}
	if _, err := LoadSessionKey(dir, filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing key file = %v", err)
	}
	os.WriteFile(filepath.Join(dir, SessionKeyFile), []byte("\n"), 0o600)
	if _, err := LoadSessionKey(dir, ""); err == nil {
		t.Error("an emptied session.key was taken")
	}
}

func TestSessionGroups(t *testing.T) {
	pol := mustParse(t, "roles: {v: {allow: [read]}}\nbindings: [{group: bound-1, roles: [v]}, {group: bound-2, roles: [v]}]")
	few := []string{"a", "bound-1"}
	if got, cut := sessionGroups(few, pol); cut || strings.Join(got, ",") != "a,bound-1" {
		t.Errorf("few groups: %v, %v", got, cut)
	}
	var many []string
	for i := range 200 {
		many = append(many, "some-long-directory-group-"+hex.EncodeToString([]byte{byte(i)}))
	}
	many = append(many, "bound-2", "bound-1")
	got, cut := sessionGroups(many, pol)
	if !cut || strings.Join(got, ",") != "bound-2,bound-1" {
		t.Errorf("many groups: %v, %v", got, cut)
	}
}

func TestGenerateToken(t *testing.T) {
	tok, sum, err := GenerateToken()
	if err != nil || len(tok) != 64 || sum != HashToken(tok) {
		t.Fatalf("GenerateToken = %q, %q, %v", tok, sum, err)
	}
	pol := mustParse(t, "tokens: [{name: new, sha256: "+sum+", roles: [admin]}]")
	a, _ := New(Options{})
	a.SetPolicy(pol)
	if p, err := a.Bearer(tok); err != nil || p.Name != "new" {
		t.Errorf("Bearer(generated) = %+v, %v", p, err)
	}
}
