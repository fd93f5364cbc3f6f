package access

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"unicode"

	"github.com/stackd/stackd/daemon/model"
)

// Actions a role may allow on the stacks it covers (see the auth
// package's roles file). ActionAdmin allows every other one, and the
// daemon-wide actions (reload, pause, backup).
const (
	ActionRead    = "read"
	ActionSync    = "sync"
	ActionPause   = "pause" // pause and resume
	ActionReload  = "reload"
	ActionApprove = "approve"
	ActionCancel  = "cancel"
	// ActionOverride lets a sync through closed change windows.
	ActionOverride = "override"
	ActionAdmin    = "admin"
)

// StackRef is what a role's stack selector looks at: the stack's name,
// the config source it came from, and its metadata's labels.
type StackRef struct {
	Name   string
	Source string
	Labels map[string]string
}

// Access says who a request is and what it may do (the auth package):
// the roles file, named tokens, OIDC sessions. web asks it for every
// request; nil keeps the single admin token of --api-token-file.
type Access interface {
	// Bearer resolves an API token presented as "Authorization: Bearer":
	// the admin token or a named token; an error (wrapping
	// ErrUnauthenticated) for an unknown, expired or revoked one.
	Bearer(token string) (model.Principal, error)
	// Session resolves the value of a session cookie; an error (wrapping
	// ErrUnauthenticated) for a forged, expired or foreign one.
	Session(cookie string) (model.Principal, error)
	// Allowed says whether p may take action on stack (nil: a
	// daemon-wide action), and when not, why, in words for the user.
	Allowed(p model.Principal, action string, stack *StackRef) (bool, string)
}

// ErrUnauthenticated is wrapped by Access for a credential that does not
// establish who the caller is.
var ErrUnauthenticated = errors.New("not authenticated")

// SignIn runs OpenID Connect's authorization code flow, with PKCE, state
// and nonce, for the web UI (the auth package).
type SignIn interface {
	// Start begins a sign-in that returns to returnTo, a path of this
	// server (anything else is refused, so that the flow cannot redirect
	// elsewhere): the issuer's URL to send the browser to, and the value
	// of a short-lived cookie that binds the flow (state, nonce, PKCE
	// verifier) to this browser.
	Start(returnTo string) (redirect, flowCookie string, err error)
	// Finish completes it on the callback, from the callback's query
	// (code, state, or the issuer's error) and the flow cookie: who signed
	// in, the value of their session cookie, and where to return. Its
	// errors wrap ErrUnauthenticated.
	Finish(ctx context.Context, query url.Values, flowCookie string) (p model.Principal, session, returnTo string, err error)
}

// LocalPath says whether p is a path of this server that is safe to
// redirect to: it starts with one slash, and no browser could read it as
// another host ("//host", "/\host", control characters and spaces,
// which browsers strip, and backslashes, which they read as slashes).
// Sign-in (auth) checks the path it returns to with it, and web every
// path it redirects to after a form or a sign-in.
func LocalPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return false
	}
	u, err := url.Parse(p)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}
