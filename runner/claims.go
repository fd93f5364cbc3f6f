package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// On a backend other than the data dir's own, two stackd stacks may
// resolve to one Pulumi stack: the same backend and stack name, and the
// project the program names. Both would operate on one state, and the
// second's program would delete the first's resources. The config cannot
// always tell (the program names the project), so the first stack to run
// on a Pulumi stack claims it and another stack is refused, naming the
// first. A claim ends when its stack is removed with its Pulumi stack.
//
// Claims are kept by Options.Claims: in a cluster, etcd's, which every
// replica shares, so that two stacks held by two replicas cannot both
// claim one Pulumi stack. Without it they are files of the data dir,
// <DataDir>/claims/<digest of the identity>, holding the owner's name.

// Claims keeps the claims of Pulumi stacks. Identities are hex digests.
type Claims interface {
	// Claim makes stack the owner of identity unless another stack is,
	// and returns the owner: stack, or the one that claimed it first.
	Claim(ctx context.Context, identity, stack string) (owner string, err error)
	// Release ends stack's claim of identity; another stack's stays.
	Release(ctx context.Context, identity, stack string) error
}

// fileClaims are the claims of a single daemon: files in dir.
type fileClaims struct{ dir string }

func (c fileClaims) Claim(_ context.Context, identity, stack string) (string, error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(c.dir, identity)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(stack)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return stack, err
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

func (c fileClaims) Release(_ context.Context, identity, stack string) error {
	path := filepath.Join(c.dir, identity)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(data)) != stack {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// claimIdentity is the key of w's claim. The data dir's files keep the
// digest under the runner's key (as they always did). Shared claims need
// a key every replica computes alike, and no secret of the backend URL
// in the shared store: a SHA-256 of the URL without its userinfo, query
// and fragment (where credentials go: postgres://user:password@…,
// ?password=…), the Pulumi stack and the project.
func (r *Runner) claimIdentity(w *workspace) string {
	if _, ok := r.claims.(fileClaims); ok {
		return r.identity(w)
	}
	h := sha256.New()
	h.Write([]byte("pulumi-stack"))
	for _, p := range []string{redactURL(w.backend), w.Stack, w.project} {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// claim claims w's Pulumi stack for w's stack, unless it is on the data
// dir's backend (where each stack keeps its state apart) or another
// stack claimed it.
func (r *Runner) claim(ctx context.Context, w *workspace) error {
	if w.backend == r.localBackend() || w.copy && !w.readOnly {
		return nil // a read-only operation's copy on a backend of its own
	}
	owner, err := r.claims.Claim(ctx, r.claimIdentity(w), w.Name)
	if err != nil {
		return fmt.Errorf("stack %s: claim its Pulumi stack: %w", w.Name, err)
	}
	if owner != w.Name {
		return fmt.Errorf("stack %s: the Pulumi stack %s of project %s on %s is stack %s's, which ran on it first; two stacks would operate on one state",
			w.Name, w.Stack, w.project, redactURL(w.backend), owner)
	}
	return nil
}

// unclaim ends w's claim of its Pulumi stack.
func (r *Runner) unclaim(ctx context.Context, w *workspace) {
	if w.backend == r.localBackend() {
		return
	}
	if err := r.claims.Release(ctx, r.claimIdentity(w), w.Name); err != nil {
		r.log.Warn("cannot end the stack's claim of its Pulumi stack", "stack", w.Name, "err", err)
	}
}
