package model

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

// String names who acted, as the audit trail, the web UI and the records
// of approvals and overrides print it: a user's name, "token:NAME" for a
// named API token, "admin-token" for the admin token, "anonymous".
func (p Principal) String() string {
	switch p.Kind {
	case PrincipalUser:
		return p.Name
	case PrincipalToken:
		return "token:" + p.Name
	case PrincipalAdmin:
		return "admin-token"
	}
	return "anonymous"
}
