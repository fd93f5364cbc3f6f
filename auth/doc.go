// Package auth says who a request is and what it may do: the roles file
// (--auth-file) with its named API tokens, roles and bindings; signed
// session cookies; and sign-in through an OpenID Connect provider. It
// implements access.Access and access.SignIn; web asks it about every
// request and serves the sign-in endpoints, cmd/stackd wires it.
//
// # Threat model: what each credential proves
//
// The admin token (--api-token-file, or the one generated into the data
// dir) proves that its holder may read that file: it allows everything.
// It is the break-glass credential, kept when every other one fails.
//
// A named API token proves possession of a secret whose SHA-256 is in
// the roles file. The file holds hashes only, so reading it gives no
// token; an unsalted SHA-256 is enough because tokens are random (32
// bytes from GenerateToken, or `openssl rand -hex 32`), which no one can
// search for; a short or guessable token is not. A token is revoked by
// removing it from the file; it expires at its expires time.
//
// A session cookie proves that a daemon holding the session key signed
// its holder in through the OpenID provider less than the session
// lifetime ago. It carries the identity only (name, subject, groups);
// roles are looked up in the roles file in force on every request, so a
// changed binding applies at once. A session cannot be revoked alone
// before it expires: signing out deletes the browser's cookie, and a new
// session key ends every session. Anyone who reads the key can mint
// sessions for any name.
//
// A token session (TokenSession: the web UI's form, given an API token)
// proves what the token proves, for as long as the token does: it names
// the token and holds an HMAC, under the session key, of the token's
// hash, never the token, and each request checks it against the admin
// token and the roles file in force, so that revoking, replacing or the
// expiry of the token ends it. It is signed as a kind of its own, so
// that it never passes for a user's session, whose names are another
// namespace.
//
// Sign-in trusts the provider for who the user is: its ID token is
// checked for the provider's signature (keys from its JWKS; alg none is
// refused), issuer, audience (the client ID, and the authorized party
// when there are several audiences), expiry, not-before and the nonce.
// The flow cookie binds the callback to the browser that started the
// sign-in (with the state: no login CSRF, and a state used once is
// refused again); PKCE (S256) keeps an intercepted code useless; the
// return path is a path of this server, never a redirect elsewhere. The
// user's name is the configured name claim's value and nothing else: a
// sign-in without it, or whose email the provider says is unverified, is
// refused, for another claim's values are another namespace, where a
// user may pick a name a binding gives roles to. Names match user
// bindings as the claim means them: an email's domain without case,
// anything else exactly.
//
// Out of this package's reach: TLS (the cookies must be Secure),
// cross-site request forgery of cookie-authenticated requests (web sets
// SameSite and checks the method and origin), and the provider's own
// account security.
package auth
