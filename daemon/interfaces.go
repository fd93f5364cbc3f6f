package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// GitSource is a repository to resolve and check out, with its resolved
// credentials.
type GitSource struct {
	// URL is projectRepo as written: https://, http://, ssh://, git://,
	// file:// or scp-like git@host:path. It never carries credentials.
	URL string
	// Ref is the branch or tag to resolve, short ("main", "v1.2") or full
	// ("refs/heads/main"); empty for a pinned commit.
	Ref string
	// RepoDir is the project's directory inside the repository.
	RepoDir string
	Shallow bool
	// Auth is nil for anonymous access.
	Auth *GitAuth
}

// GitAuth holds resolved Git credentials: secrets that must never reach a
// log, an error, the store or an HTTP response.
type GitAuth struct {
	SSHPrivateKey []byte // PEM
	SSHPassphrase string
	// Username and Password are HTTP basic credentials; an access token is
	// sent as the password of user "git", as PKO does.
	Username string
	Password string
}

// String redacts, so that printing a GitAuth by mistake leaks nothing.
func (a *GitAuth) String() string { return "[credentials]" }

// GoString redacts too, for %#v.
func (a *GitAuth) GoString() string { return "[credentials]" }

// Key identifies the source's URL together with its credentials without
// revealing them: sources with equal keys may share one ls-remote.
func (s GitSource) Key() string {
	h := sha256.New()
	h.Write([]byte(s.URL))
	if a := s.Auth; a != nil {
		for _, part := range [][]byte{a.SSHPrivateKey, []byte(a.SSHPassphrase), []byte(a.Username), []byte(a.Password)} {
			h.Write([]byte{0})
			h.Write(part)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Fetcher resolves and checks out Git sources. gitwatch implements it.
// Its methods are safe for concurrent use, and every error it returns is
// free of credentials.
type Fetcher interface {
	// Resolve returns the full SHA that src.Ref points at, by ls-remote.
	// Calls for sources with the same Key within the fetcher's cache
	// period share one remote call.
	Resolve(ctx context.Context, src GitSource) (string, error)
	// Checkout makes dir hold the tree of commit and returns the project
	// directory (dir joined with src.RepoDir, checked to stay inside dir).
	// dir is replaced only by a complete checkout, never left half
	// written; a dir already at commit is reused.
	Checkout(ctx context.Context, src GitSource, commit, dir string) (string, error)
	// Forget drops what is cached for url, so that the next Resolve asks
	// the remote: a push webhook calls it.
	Forget(url string)
}
