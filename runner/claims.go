package runner

import (
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
// on a Pulumi stack claims it, in <DataDir>/claims/<digest of the
// identity>, and another stack is refused, naming the first. A claim
// ends when its stack is removed with its Pulumi stack. Claims are the
// data dir's: replicas of a cluster each keep their own.

// claimsDir holds the claims.
func (r *Runner) claimsDir() string { return filepath.Join(r.opts.DataDir, "claims") }

// claim claims w's Pulumi stack for w's stack, unless it is on the data
// dir's backend (where each stack keeps its state apart) or another
// stack claimed it.
func (r *Runner) claim(w *workspace) error {
	if w.backend == r.localBackend() || w.copy && !w.readOnly {
		return nil // a read-only operation's copy on a backend of its own
	}
	if err := os.MkdirAll(r.claimsDir(), 0o700); err != nil {
		return fmt.Errorf("stack %s: claim its Pulumi stack: %w", w.Name, err)
	}
	path := filepath.Join(r.claimsDir(), r.identity(w))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(w.Name)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("stack %s: claim its Pulumi stack: %w", w.Name, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("stack %s: claim its Pulumi stack: %w", w.Name, err)
	}
	if owner := strings.TrimSpace(string(data)); owner != w.Name {
		return fmt.Errorf("stack %s: the Pulumi stack %s of project %s on %s is stack %s's, which ran on it first; two stacks would operate on one state",
			w.Name, w.Stack, w.project, redactURL(w.backend), owner)
	}
	return nil
}

// unclaim ends w's claim of its Pulumi stack.
func (r *Runner) unclaim(w *workspace) {
	path := filepath.Join(r.claimsDir(), r.identity(w))
	if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) == w.Name {
		_ = os.Remove(path)
	}
}
