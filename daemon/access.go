package daemon

import (
	"context"
	"errors"
	"net/url"
	"time"
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

// Kinds of Principal.
const (
	// PrincipalUser signed in through OpenID Connect.
	PrincipalUser = "user"
	// PrincipalToken presented a named API token.
	PrincipalToken = "token"
	// PrincipalAdmin presented the break-glass admin token
	// (--api-token-file, or the one generated into the data dir).
	PrincipalAdmin = "admin"
	// PrincipalAnonymous presented nothing, or nothing valid.
	PrincipalAnonymous = "anonymous"
)

// Principal is who makes a request.
type Principal struct {
	Kind string `json:"kind"`
	// Name is the user's name (the OIDC claim the operator chose), or the
	// token's name; empty for the admin token and anonymous requests.
	Name string `json:"name,omitempty"`
	// Subject is the OIDC subject of a user.
	Subject string `json:"subject,omitempty"`
	// Groups are the user's groups (the configured claim).
	Groups []string `json:"groups,omitempty"`
}

// Outcomes of an audited request.
const (
	// AuditAllowed: the request was allowed and done (Status < 400).
	AuditAllowed = "allowed"
	// AuditFailed: allowed, but it failed (Status >= 400).
	AuditFailed = "failed"
	// AuditDenied: refused for want of a role (403).
	AuditDenied = "denied"
	// AuditUnauthenticated: refused for want of a valid identity (401): a
	// missing, forged, expired or revoked credential.
	AuditUnauthenticated = "unauthenticated"
)

// AuditEntry records one mutating request, or one refused request: who,
// what, which stack, when, from where, and the outcome. It never holds a
// credential or any other secret.
type AuditEntry struct {
	// Seq orders the entries; the store assigns it.
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Principal Principal `json:"principal"`
	// Action is one of the Action* constants, or what was attempted
	// ("sign-in") when no action applies.
	Action string `json:"action"`
	// Stack is the stack acted on; empty for daemon-wide actions.
	Stack string `json:"stack,omitempty"`
	// Method and Path are the HTTP request's.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Remote is the client's address.
	Remote  string `json:"remote,omitempty"`
	Outcome string `json:"outcome"`
	// Status is the HTTP status answered.
	Status int `json:"status,omitempty"`
	// Reason says why a request was refused or failed; for an allowed
	// override of change windows, the reason its author gave.
	Reason string `json:"reason,omitempty"`
	// Node is the replica that served the request (cluster mode).
	Node string `json:"node,omitempty"`
}

// AuditFilter selects audit entries; zero fields select all.
type AuditFilter struct {
	Stack string
	// Actor matches the principal's name.
	Actor string
	Since time.Time
	// Before, when not zero, selects entries with a lower Seq (paging).
	Before uint64
	// Limit bounds the entries returned, newest first.
	Limit int
}

// Matches says whether e is selected by f (Before and Limit aside).
func (f AuditFilter) Matches(e AuditEntry) bool {
	return (f.Stack == "" || e.Stack == f.Stack) &&
		(f.Actor == "" || e.Principal.Name == f.Actor) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// AuditLog keeps the audit trail durably: BoltDB on one node, etcd in a
// cluster, where every replica's entries are seen by all.
type AuditLog interface {
	// PutAudit appends e, assigning its Seq.
	PutAudit(e AuditEntry) (AuditEntry, error)
	// Audit lists the entries f selects, newest first.
	Audit(f AuditFilter) ([]AuditEntry, error)
	// PruneAudit deletes the entries older than before, and says how
	// many.
	PruneAudit(before time.Time) (int, error)
}

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
	Bearer(token string) (Principal, error)
	// Session resolves the value of a session cookie; an error (wrapping
	// ErrUnauthenticated) for a forged, expired or foreign one.
	Session(cookie string) (Principal, error)
	// Allowed says whether p may take action on stack (nil: a
	// daemon-wide action), and when not, why, in words for the user.
	Allowed(p Principal, action string, stack *StackRef) (bool, string)
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
	Finish(ctx context.Context, query url.Values, flowCookie string) (p Principal, session, returnTo string, err error)
}
