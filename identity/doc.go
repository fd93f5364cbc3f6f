// Package identity makes stackd an OpenID Connect issuer of workload
// identities: each operation of a stack with spec.credentials gets
// tokens of its own, signed by stackd, which a cloud exchanges for
// short-lived credentials of the role its trust policy binds to the
// token's claims (AWS's AssumeRoleWithWebIdentity, Google's workload
// identity federation, Azure's federated credentials, Vault's JWT auth).
// It is the only package that signs them; web serves its two documents
// (the discovery document and the JWKS), the runner writes the files.
//
// # Threat model: what a token proves
//
// A token says that stackd started an operation of one stack, of one
// scope, a few minutes ago: iss is --oidc-issuer-url, sub (by default
// stack:NAME:op:OPERATION:scope:SCOPE) and the claims stack, operation
// and scope are stackd's decisions, never the program's. Scope is read
// for operations that change nothing (previews, pull requests' previews,
// drift checks), write for those that apply (up, refresh, destroy). The
// claims repository, commit, labels, pull_request and author say where
// the program came from; approved_by who approved the plan an up
// applies. A token lives as long as the operation may, at most TokenTTL
// (15 minutes by default), and is made anew before it expires.
//
// The cloud decides what a token may do: its trust policy must pin sub
// (or the claims) to one stack and one scope. A program reads its own
// operation's token (it must, to use it): a hostile program can use it,
// or leak it, for as long as it lives, and gets the one stack's role
// for that scope, never another stack's (the sandbox keeps each
// operation's token files from every other operation) and never write
// from a preview. The token is masked in the operation's log and
// outputs, and never stored.
//
// Signing keys are RSA (RS256, which every cloud accepts), kept in the
// data dir (KeyFile, mode 0600, out of every program's reach) and never
// elsewhere: in a cluster each replica signs with its own key and shares
// only the public half (Directory), so that every replica's JWKS holds
// every replica's keys. A key signs for Rotation (30 days by default)
// and stays in the JWKS until its last token expired; Rotate with
// emergency withdraws every earlier key at once. Relying parties cache
// the JWKS (Vault until it meets a token of a key it does not know), so
// a withdrawn key's tokens stop validating there when they read it
// again, and anyway when they expire. Anyone who reads a key can sign
// tokens for any stack until the key is rotated out.
package identity
