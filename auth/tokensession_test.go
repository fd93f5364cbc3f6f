package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// TestTokenSession: signing in with the admin token or a named token
// gives a session naming it, which holds neither the token nor its
// hash, is a kind of its own (never a user's session, nor a bearer
// token), lasts the TTL or until the token expires, and ends as soon as
// the token is revoked or replaced under its name.
func TestTokenSession(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	dir := t.TempDir()
	path := writeRoles(t, dir, "  - {name: soon, sha256: "+HashToken("secret-soon")+", roles: [viewer], expires: 2026-12-01T02:00:00Z}\n", "ci", "bot")
	a, err := New(Options{AdminToken: "break-glass", File: path, SessionKey: testKey(1), Now: clock})
	if err != nil {
		t.Fatal(err)
	}

	p, ci, err := a.TokenSession("secret-ci", time.Hour)
	if err != nil || p.String() != "token:ci" {
		t.Fatalf("TokenSession(ci) = %+v, %v", p, err)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimPrefix(ci, tokenSessionPrefix), ".")[0])
	for _, secret := range []string{"secret-ci", HashToken("secret-ci")} {
		if strings.Contains(ci, secret) || strings.Contains(string(payload), secret) {
			t.Errorf("the session holds %q: %s", secret, payload)
		}
	}
	if got, err := a.Session(ci); err != nil || got.String() != "token:ci" {
		t.Errorf("Session(ci's) = %+v, %v", got, err)
	}
	if _, err := a.Bearer(ci); err == nil {
		t.Error("a token session is taken as a bearer token")
	}
	if _, err := openSession(a.sessions, ci, now); err == nil {
		t.Error("a token session opens as a user's session")
	}
	if _, admin, err := a.TokenSession("break-glass", time.Hour); err != nil {
		t.Errorf("the admin token: %v", err)
	} else if got, err := a.Session(admin); err != nil || got.Kind != model.PrincipalAdmin {
		t.Errorf("Session(admin's) = %+v, %v", got, err)
	}

	// Refused: unknown tokens, sessions given as tokens, no token.
	user, _ := newSession(a.sessions, model.Principal{Kind: model.PrincipalUser, Name: "alice"}, now, time.Hour)
	for _, tok := range []string{"secret-nobody", user, ci, ""} {
		if _, s, err := a.TokenSession(tok, time.Hour); err == nil || s != "" || !errors.Is(err, access.ErrUnauthenticated) ||
			(tok != "" && strings.Contains(err.Error(), tok)) {
			t.Errorf("TokenSession(%.12q) = %q, %v", tok, s, err)
		}
	}

	// A token that expires before the TTL ends its session with it.
	_, soon, err := a.TokenSession("secret-soon", 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(90 * time.Minute)
	if _, err := a.Session(ci); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a session past its TTL: %v", err)
	}
	if _, err := a.Session(soon); err != nil {
		t.Errorf("soon's session before the token expires: %v", err)
	}
	now = now.Add(time.Hour)
	if _, err := a.Session(soon); err == nil {
		t.Error("a session outlives its token")
	}

	// Revoked, and replaced under the same name: the session ends.
	now = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	_, ci, _ = a.TokenSession("secret-ci", time.Hour)
	_, bot, _ := a.TokenSession("secret-bot", time.Hour)
	writeRoles(t, dir, "  - {name: bot, sha256: "+HashToken("another-bot")+", roles: [viewer]}\n")
	if _, err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"revoked": ci, "replaced": bot} {
		if _, err := a.Session(s); err == nil || !strings.Contains(err.Error(), "no longer valid") {
			t.Errorf("the session of a %s token: %v", name, err)
		}
	}

	// Another key's session, and no key at all.
	other, _ := New(Options{AdminToken: "break-glass", SessionKey: testKey(2), Now: clock})
	_, admin, _ := a.TokenSession("break-glass", time.Hour)
	if _, err := other.Session(admin); err == nil {
		t.Error("a session signed with another key is taken")
	}
	none, _ := New(Options{AdminToken: "break-glass", Now: clock})
	if _, _, err := none.TokenSession("break-glass", time.Hour); err == nil {
		t.Error("a session is signed without a session key")
	}
}
