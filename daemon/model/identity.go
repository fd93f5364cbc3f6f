package model

import (
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Scopes of an operation's cloud token: read for what changes nothing
// (previews, pull requests' previews, drift checks), write for what
// applies (up, refresh, destroy).
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// IdentityRequest asks for the cloud credentials of one operation: who
// it is for (the token's claims) and which clouds (spec.credentials). It
// holds no secret. The builder of an operation fills in the stack's
// side; the runner the operation and its scope, which it alone decides.
type IdentityRequest struct {
	Stack      string
	Labels     map[string]string
	Repository string
	Commit     string
	// PullRequest and Author are a pull request's, for its previews and
	// review stacks; ApprovedBy who approved the plan an up applies.
	PullRequest int
	Author      string
	ApprovedBy  string
	// Operation is the operation's type ("preview", "up", "drift", …)
	// and Scope ScopeRead or ScopeWrite.
	Operation string
	Scope     string
	// ReadOnly is a pull request's preview (Operation.ReadOnly).
	ReadOnly    bool
	Credentials spec.Credentials
}

// CredentialSet is what an operation's processes get: Files (names
// relative to the directory they are written to, contents) and the
// variables Env that point at them. Secrets are the values a log or an
// output must never show (the tokens); Expires is when the first token
// ends, before which the set is made anew.
type CredentialSet struct {
	Files   map[string][]byte
	Env     map[string]string
	Secrets []string
	Expires time.Time
}
