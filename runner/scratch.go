package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stackd/stackd/daemon"
)

// scratch turns w into a throwaway copy for a read-only operation (a pull
// request's preview): its state directory becomes a copy of the stack's,
// so that the config applied and the event log written never touch the
// stack's own files, and a stack that does not exist yet is created on a
// file backend of the copy's, never on the stack's backend. The returned
// func removes the copy.
func (r *Runner) scratch(ctx context.Context, w *workspace) (func(), error) {
	dir, err := os.MkdirTemp(filepath.Join(r.opts.DataDir, "tmp"), "preview-")
	if err != nil {
		return nil, fmt.Errorf("stack %s: scratch directory: %w", w.Name, err)
	}
	done := func() { _ = os.RemoveAll(dir) }
	if err := copyFiles(w.dir, dir); err != nil {
		done()
		return nil, fmt.Errorf("stack %s: copy the stack's state: %w", w.Name, err)
	}
	w.dir, w.configFile, w.readOnly, w.copy = dir, filepath.Join(dir, w.stackFile), true, true
	if err := r.mkdirs(w); err != nil {
		done()
		return nil, err
	}
	exists, err := r.stackExists(ctx, w)
	if err != nil {
		done()
		return nil, err
	}
	if !exists {
		err = r.scratchBackend(w, dir)
	}
	if err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// stackExists says whether w's stack exists on its backend: the marker
// says so when the runner created or found it before; on the data dir's
// own backend its checkpoint does. Only another backend is asked, as
// `stack ls` on a file backend that holds nothing yet would initialise
// it, which a read-only operation may not.
func (r *Runner) stackExists(ctx context.Context, w *workspace) (bool, error) {
	if m := w.readMarker(); m.Identity == r.identity(w) {
		if _, err := os.Stat(w.configFile); err == nil {
			return true, nil
		}
	}
	if w.backend == r.localBackend() {
		return r.inLocalBackend(w), nil
	}
	err := r.checkStack(ctx, w)
	if errors.Is(err, daemon.ErrStackNotFound) {
		return false, nil
	}
	return err == nil, err
}

// scratchBackend points w at a file backend in dir, with a passphrase of
// its own, and forgets what was copied of the real stack.
func (r *Runner) scratchBackend(w *workspace, dir string) error {
	backend := filepath.Join(dir, "backend")
	if err := os.Mkdir(backend, 0o700); err != nil {
		return fmt.Errorf("stack %s: scratch backend: %w", w.Name, err)
	}
	pass := filepath.Join(dir, "passphrase")
	if _, err := ensureSecretFile(pass); err != nil {
		return fmt.Errorf("stack %s: scratch passphrase: %w", w.Name, err)
	}
	w.forget()
	w.backend, w.passphraseFile, w.ownPassphrase = "file://"+backend, pass, true
	w.state, w.readOnly = w.backend, false // the copy's own
	w.UseLocalStackOnly = false
	if w.SecretsProvider == "" || isPassphrase(w.SecretsProvider) {
		w.SecretsProvider = ""
	}
	w.redact = r.redactor(w)
	return nil
}

// isPassphrase says whether provider is the passphrase provider.
func isPassphrase(provider string) bool { return provider == "passphrase" }

// copyFiles copies the regular files of src (not its directories) into
// dst. A missing src copies nothing.
func copyFiles(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "events.json" {
			continue
		}
		data, err := readRegular(filepath.Join(src, e.Name()))
		if errors.Is(err, errForeign) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
