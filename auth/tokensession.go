package auth

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// Signing in with an API token: a person without an OpenID provider (or
// beside it) gives the web UI's form the admin token or a named token,
// and gets a session cookie, as a user signed in through the provider
// does. The session names the token (its kind and name) and carries a
// fingerprint of the token's hash, never the token: a MAC keyed with
// the session key, so that the cookie gives nothing to guess against.
// It is checked against the roles file in force on every request, so
// that a token deleted from the file (revoked), replaced under its name
// or expired ends its sessions at once, and the token's roles are the
// file's, as for the token itself.

// tokenSessionClaims is what the session of a token sign-in holds.
type tokenSessionClaims struct {
	// Kind is model.PrincipalToken or model.PrincipalAdmin; Name the
	// token's name (none for the admin token).
	Kind string `json:"k"`
	Name string `json:"n,omitempty"`
	// Print is the fingerprint of the token's SHA-256 (fingerprint).
	Print   string `json:"f"`
	Issued  int64  `json:"iat"`
	Expires int64  `json:"exp"`
}

// TokenSession signs in the holder of tok, an API token (the admin token
// or a named token of the roles file in force, compared as Bearer
// compares them): who holds it and the value of a session cookie lasting
// ttl, or less when the token expires sooner. A session of `stackd
// login`, which Bearer takes, is not a token here. Errors wrap
// access.ErrUnauthenticated and never hold the token.
func (a *Access) TokenSession(tok string, ttl time.Duration) (model.Principal, string, error) {
	if a.tokenSessions == nil {
		return anonymous, "", errors.New("no session key is configured")
	}
	if tok == "" {
		return anonymous, "", fmt.Errorf("no API token was given: %w", access.ErrUnauthenticated)
	}
	if strings.HasPrefix(tok, sessionPrefix) || strings.HasPrefix(tok, tokenSessionPrefix) {
		return anonymous, "", fmt.Errorf("a session is not an API token: %w", access.ErrUnauthenticated)
	}
	p, sum, expires, err := a.resolveToken(tok)
	if err != nil {
		return anonymous, "", err
	}
	now := a.now()
	end := now.Add(ttl)
	if !expires.IsZero() && expires.Before(end) {
		end = expires
	}
	session, err := a.tokenSessions.sign(tokenSessionClaims{Kind: p.Kind, Name: p.Name, Print: a.fingerprint(sum),
		Issued: now.Unix(), Expires: end.Unix()})
	if err != nil {
		return anonymous, "", err
	}
	a.log.Info("signed in with an API token", "principal", p.String())
	return p, session, nil
}

// fingerprint is what a session keeps of a token's SHA-256: its MAC
// under the token sessions' key.
func (a *Access) fingerprint(sum [32]byte) string {
	return base64.RawURLEncoding.EncodeToString(a.tokenSessions.mac("token " + string(sum[:])))
}

// openTokenSession checks the session of a token sign-in: its signature
// and times, and that its token is still the one the roles file (or the
// admin token) holds under its name, and has not expired.
func (a *Access) openTokenSession(value string) (model.Principal, error) {
	var c tokenSessionClaims
	if err := a.tokenSessions.open(value, &c); err != nil {
		return anonymous, fmt.Errorf("session: %w", err)
	}
	now := a.now()
	switch {
	case c.Print == "" || c.Issued == 0 || c.Expires == 0:
		return anonymous, fmt.Errorf("session: malformed cookie: %w", access.ErrUnauthenticated)
	case !now.Before(time.Unix(c.Expires, 0)):
		return anonymous, fmt.Errorf("session expired at %s: sign in again: %w", time.Unix(c.Expires, 0).UTC().Format(time.RFC3339), access.ErrUnauthenticated)
	case time.Unix(c.Issued, 0).After(now.Add(clockSkew)):
		return anonymous, fmt.Errorf("session: issued in the future: %w", access.ErrUnauthenticated)
	}
	revoked := fmt.Errorf("session: the token it was signed in with is no longer valid (revoked, replaced or expired): sign in again: %w", access.ErrUnauthenticated)
	switch c.Kind {
	case model.PrincipalAdmin:
		if a.admin == nil || !hmac.Equal([]byte(c.Print), []byte(a.fingerprint(*a.admin))) {
			return anonymous, revoked
		}
		return model.Principal{Kind: model.PrincipalAdmin}, nil
	case model.PrincipalToken:
		for _, t := range a.policy.Load().tokens {
			if t.name == c.Name && hmac.Equal([]byte(c.Print), []byte(a.fingerprint(t.hash))) &&
				(t.expires.IsZero() || now.Before(t.expires)) {
				return model.Principal{Kind: model.PrincipalToken, Name: t.name}, nil
			}
		}
		return anonymous, revoked
	}
	return anonymous, fmt.Errorf("session: malformed cookie: %w", access.ErrUnauthenticated)
}
