package model

import "time"

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
