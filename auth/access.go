package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// Options configure an Access.
type Options struct {
	// AdminToken is the break-glass token (--api-token-file, or the one
	// generated into the data dir): it allows everything. Empty: none.
	AdminToken string
	// File is the roles file (--auth-file). Empty: no roles file, and
	// nobody but the admin token holds a role.
	File string
	// SessionKey signs session and sign-in flow cookies (LoadSessionKey).
	// Nil: every session cookie is refused, and sign-in cannot be set up.
	SessionKey []byte
	// Log receives reloads of the roles file. Nil: discarded.
	Log *slog.Logger
	// Now is the clock, for tests. Nil: time.Now.
	Now func() time.Time
}

// Access implements access.Access: who a request is (the admin token, a
// named token of the roles file, a session cookie) and what it may do
// (the roles file in force). It is safe for concurrent use; the roles
// file is swapped in whole by Reload, Watch or SetPolicy.
type Access struct {
	file     string
	admin    *[32]byte // SHA-256 of the admin token; nil: none
	policy   atomic.Pointer[Policy]
	sessions *signer
	flows    *signer
	// tokenSessions signs the sessions of token sign-ins (TokenSession).
	tokenSessions *signer
	// failed says whether the last reload failed, so that the next one
	// that succeeds is reported even when the file is back as it was.
	failed atomic.Bool
	// emailNames says that users are named by their email: NewSignIn
	// sets it from its name claim. It decides how a user's name matches
	// the user bindings (Policy.userRoles); without a sign-in, exactly.
	emailNames atomic.Bool
	log        *slog.Logger
	now        func() time.Time
}

var _ access.Access = (*Access)(nil)

// New makes an Access, loading the roles file if one is given: a file
// with problems gives a *PolicyError, so that the daemon does not start
// with other rights than its operator wrote.
func New(o Options) (*Access, error) {
	a := &Access{file: o.File, log: o.Log, now: o.Now,
		sessions: newSigner(o.SessionKey, sessionPrefix), flows: newSigner(o.SessionKey, flowPrefix),
		tokenSessions: newSigner(o.SessionKey, tokenSessionPrefix)}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if o.AdminToken != "" {
		sum := sha256.Sum256([]byte(o.AdminToken))
		a.admin = &sum
	}
	pol := &Policy{}
	if o.File != "" {
		var err error
		if pol, err = Load(o.File); err != nil {
			return nil, err
		}
		a.log.Info("roles file applied", "file", o.File, "policy", pol.Summary())
	}
	a.policy.Store(pol)
	return a, nil
}

// Policy returns the roles file in force.
func (a *Access) Policy() *Policy { return a.policy.Load() }

// SetPolicy puts pol in force for every request from now on.
func (a *Access) SetPolicy(pol *Policy) { a.policy.Store(pol) }

// Reload reads the roles file again and puts it in force. A file with
// problems, or one that cannot be read, leaves the one in force and is
// logged and returned. changed says whether the file differed from the
// one in force, or the last reload had failed.
func (a *Access) Reload() (changed bool, err error) {
	if a.file == "" {
		return false, nil
	}
	pol, err := Load(a.file)
	if err != nil {
		a.failed.Store(true)
		a.log.Warn("roles file not applied; the one in force stays", "file", a.file, "err", err)
		return false, err
	}
	recovered := a.failed.Swap(false)
	if pol.digest == a.policy.Load().digest {
		return recovered, nil
	}
	a.policy.Store(pol)
	a.log.Info("roles file applied", "file", a.file, "policy", pol.Summary())
	return true, nil
}

// Bearer resolves an API token: the admin token, or a named token of the
// roles file in force. Every named token's hash is compared, in constant
// time, whichever matches. A value in the format of a session (what
// `stackd login` stores) is checked as a session instead: a user signed
// in through the browser. Errors wrap access.ErrUnauthenticated and
// never hold the token.
func (a *Access) Bearer(tok string) (model.Principal, error) {
	if tok == "" {
		return anonymous, fmt.Errorf("empty API token: %w", access.ErrUnauthenticated)
	}
	if strings.HasPrefix(tok, sessionPrefix) { // never a generated token: those are hex
		return a.Session(tok)
	}
	p, _, _, err := a.resolveToken(tok)
	return p, err
}

// resolveToken resolves an API token, the admin token or a named one,
// comparing every named token's hash in constant time: who holds it,
// its SHA-256, and when it expires (zero: never).
func (a *Access) resolveToken(tok string) (model.Principal, [32]byte, time.Time, error) {
	sum := sha256.Sum256([]byte(tok))
	if a.admin != nil && subtle.ConstantTimeCompare(sum[:], a.admin[:]) == 1 {
		return model.Principal{Kind: model.PrincipalAdmin}, sum, time.Time{}, nil
	}
	var found *token
	for _, t := range a.policy.Load().tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
			found = t
		}
	}
	switch {
	case found == nil:
		return anonymous, sum, time.Time{}, fmt.Errorf("unknown or revoked API token: %w", access.ErrUnauthenticated)
	case !found.expires.IsZero() && !a.now().Before(found.expires):
		return anonymous, sum, time.Time{}, fmt.Errorf("token %s expired at %s: %w", found.name, found.expires.UTC().Format(time.RFC3339), access.ErrUnauthenticated)
	}
	return model.Principal{Kind: model.PrincipalToken, Name: found.name}, sum, found.expires, nil
}

// Session resolves the value of a session cookie: a user signed in
// through OpenID Connect (SignIn), or the holder of an API token signed
// in with it (TokenSession). A cookie signed with another key, altered,
// expired or malformed, or of a token since revoked, gives an error
// wrapping access.ErrUnauthenticated.
func (a *Access) Session(cookie string) (model.Principal, error) {
	if strings.HasPrefix(cookie, tokenSessionPrefix) {
		return a.openTokenSession(cookie)
	}
	return openSession(a.sessions, cookie, a.now())
}

// Allowed says whether p may take action on stack (nil: a daemon-wide
// action) under the roles file in force, and when not, why. The admin
// token may do everything; a token has the roles the file gives it; a
// user the roles bound to their name (exactly, but for the domain of an
// email, compared without case: Policy.userRoles) and to each of their
// groups; everybody, signed in or not, the anonymous roles. A role
// allows its actions (admin: every action) on the stacks its selector
// matches, and daemon-wide only when it names no stacks, sources or
// labels.
func (a *Access) Allowed(p model.Principal, action string, stack *access.StackRef) (bool, string) {
	return a.policy.Load().allowed(p, a.emailNames.Load(), action, stack)
}

// RolesAllowing lists the roles that would allow action on stack, for a
// refusal to name (the web server's RoleLister).
func (a *Access) RolesAllowing(action string, stack *access.StackRef) []string {
	return a.policy.Load().RolesAllowing(action, stack)
}

// GenerateToken makes a new API token: 32 random bytes, hex-encoded, and
// the SHA-256 of it to write into the roles file. The token is shown to
// its owner once and never stored.
func GenerateToken() (tok, sha256Hex string, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", err
	}
	tok = hex.EncodeToString(raw)
	return tok, HashToken(tok), nil
}

// HashToken is the hex SHA-256 of a token, as the roles file holds it.
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}
