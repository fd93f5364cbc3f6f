package preview

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// A preview reads the state of the stack it previews: its program runs
// with that state open, read-only, in the sandbox. A pull request to a
// Git config source writes the manifests a preview takes, but must not
// choose which state that is: naming another stack's backend or Pulumi
// stack would let its program read that stack's state (and, on the data
// dir's backend, its passphrase). So a stack in force is previewed only
// where the config in force puts its state (movedState), and a stack the
// pull request adds only on an empty backend of its own (ownBackend).

// errMovedState refuses the preview of a stack whose state a pull request
// moves. It quotes no value: a backend read from a Secret is a secret.
var errMovedState = errors.New("not previewed: the pull request changes where the stack's state is kept " +
	"(spec.stack, spec.backend or " + spec.BackendURLEnv + "), and a preview reads only the state of the stack in force; " +
	"the change takes effect when merged")

// movedState says why next, stack base of the config in force cur as a
// pull request's manifests propose it (with its ungranted references
// withheld; cfg is its config), may not be previewed, or nil: it names
// another Pulumi stack, or resolves to another backend, than base does.
func (p *Previewer) movedState(cur *spec.Config, base *spec.Stack, cfg *spec.Config, next *spec.Stack) error {
	if base.Spec.Stack != next.Spec.Stack {
		return errMovedState
	}
	was, err := p.opts.Daemon.StackBackend(cur, base)
	if err != nil {
		return fmt.Errorf("not previewed: the backend of the stack in force: %w", err)
	}
	now, err := p.opts.Daemon.StackBackend(cfg, next)
	if err != nil || now != was {
		return errMovedState
	}
	return nil
}

// ownBackend points ws, the workspace of a stack that a pull request
// adds, at an empty file backend in dir, the preview's work dir: the
// stack is new, so nothing of any state is read, and the preview shows
// what its first update would create.
func ownBackend(ws *model.Workspace, dir string) error {
	backend := filepath.Join(dir, "backend")
	if err := os.MkdirAll(backend, 0o700); err != nil {
		return fmt.Errorf("the preview's own backend: %w", err)
	}
	ws.Backend = "file://" + backend
	if _, ok := ws.Env[spec.BackendURLEnv]; ok {
		env := make(map[string]string, len(ws.Env))
		for k, v := range ws.Env {
			if k != spec.BackendURLEnv {
				env[k] = v
			}
		}
		ws.Env = env
	}
	return nil
}
