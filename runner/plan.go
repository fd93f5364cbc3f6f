package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// Saved plans live in the runner's state directory of their stack,
// <DataDir>/workspaces/<name>/plans/<id>.json: a directory of mode 0700
// that only the stack's own processes may reach in the sandbox, files of
// mode 0600. A plan may hold what the engine writes of secrets, so it is
// deleted once applied, discarded or superseded.

// planDir is where w's saved plans are.
func (w *workspace) planDir() string { return filepath.Join(w.dir, "plans") }

// planPath is the file of w's plan id.
func (w *workspace) planPath(id string) string { return filepath.Join(w.planDir(), id+".json") }

// validPlanID tells whether id is a plan ID as newPlan makes them, so
// that it is safe in a path.
func validPlanID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// newPlan makes w's plan directory, empties it (a new plan supersedes
// the older ones) and returns a new plan's ID and path.
func newPlan(w *workspace) (id, path string, err error) {
	if err := os.RemoveAll(w.planDir()); err != nil {
		return "", "", fmt.Errorf("stack %s: discard older plans: %w", w.Name, err)
	}
	if err := os.MkdirAll(w.planDir(), 0o700); err != nil {
		return "", "", fmt.Errorf("stack %s: plan directory: %w", w.Name, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id = hex.EncodeToString(b[:])
	return id, w.planPath(id), nil
}

// savedPlan describes the plan id that a preview saved: the file's
// digest and what it was made against. The file is made mode 0600.
func (r *Runner) savedPlan(ctx context.Context, w *workspace, id string) (*model.Plan, error) {
	digest, err := ownPlanDigest(w, id)
	if err != nil {
		return nil, fmt.Errorf("stack %s: the preview saved no plan: %w", w.Name, err)
	}
	state, err := r.stateDigest(ctx, w)
	if err != nil {
		return nil, err
	}
	return &model.Plan{ID: id, Digest: digest, Config: r.boundConfig(w), State: state}, nil
}

// checkPlan returns the path of plan p of w, once it is sure that the
// plan file and what it was made against are unchanged; otherwise an
// error that is daemon.ErrPlanStale.
func (r *Runner) checkPlan(ctx context.Context, w *workspace, p model.Plan) (string, error) {
	if !validPlanID(p.ID) {
		return "", fmt.Errorf("stack %s: invalid plan id %q", w.Name, p.ID)
	}
	path := w.planPath(p.ID)
	digest, err := planDigest(w, p.ID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", stalePlan(w, "the plan file is gone")
	case err != nil:
		return "", fmt.Errorf("stack %s: plan: %w", w.Name, err)
	case digest != p.Digest:
		return "", stalePlan(w, "the plan file changed")
	}
	return path, r.checkBound(ctx, w, p)
}

// checkBound fails, with an error that is daemon.ErrPlanStale, unless
// w's config and state are those plan p was made against.
func (r *Runner) checkBound(ctx context.Context, w *workspace, p model.Plan) error {
	if r.boundConfig(w) != p.Config {
		return stalePlan(w, "the stack's config, secrets or environment changed")
	}
	state, err := r.stateDigest(ctx, w)
	if err != nil {
		return err
	}
	if state != p.State {
		return stalePlan(w, "the stack's state changed")
	}
	return nil
}

// destroyPlan is the plan id of a destroy preview of w: there is no plan
// file (`pulumi destroy` takes none), so it binds the stack's state and
// config as they are now; a destroy runs with it only while they stay
// so. The destroy deletes what the state holds, so the same state makes
// the same deletes.
func (r *Runner) destroyPlan(ctx context.Context, w *workspace, id string) (*model.Plan, error) {
	state, err := r.stateDigest(ctx, w)
	if err != nil {
		return nil, err
	}
	config := r.boundConfig(w)
	return &model.Plan{ID: id, Digest: r.digest("destroy-plan/v1", []byte(config), []byte(state)), Config: config, State: state}, nil
}

// checkDestroyPlan fails, with an error that is daemon.ErrPlanStale,
// unless the state and config that plan p of a destroy preview bound are
// unchanged.
func (r *Runner) checkDestroyPlan(ctx context.Context, w *workspace, p model.Plan) error {
	if !validPlanID(p.ID) {
		return fmt.Errorf("stack %s: invalid plan id %q", w.Name, p.ID)
	}
	return r.checkBound(ctx, w, p)
}

// stalePlan is the error of a plan that no longer holds because of why.
func stalePlan(w *workspace, why string) error {
	return fmt.Errorf("stack %s: %w: %s since the preview, so nothing was applied", w.Name, daemon.ErrPlanStale, why)
}

// planViolated wraps the error of an up that the engine stopped at a step
// its plan does not allow (reality moved since the preview).
func planViolated(err error) error {
	msg := err.Error()
	for _, s := range []string{"violates plan", "is not allowed by the plan", "no plan for resource"} {
		if strings.Contains(msg, s) {
			return &staleError{err}
		}
	}
	return err
}

// staleError is an up that the engine stopped because a step left its
// plan; its message says so before the engine's.
type staleError struct{ err error }

func (e *staleError) Error() string {
	return daemon.ErrPlanStale.Error() + " (the resources changed since the preview); the update stopped before any step outside the plan: " + e.err.Error()
}
func (e *staleError) Unwrap() []error { return []error{e.err, daemon.ErrPlanStale} }

// boundConfig digests what the config file was built from (its secrets
// among it) with the stack's environment.
func (r *Runner) boundConfig(w *workspace) string {
	parts := [][]byte{[]byte(w.readMarker().Config)}
	for _, kv := range envList(w.Env) {
		parts = append(parts, []byte(kv))
	}
	return r.digest("plan-config/v1", parts...)
}

// stateDigest digests w's state (secrets encrypted): on a file backend
// the checkpoint's deployment as the engine wrote it (see
// readCheckpoint), elsewhere what `pulumi stack export` prints. The two
// never meet: a stack's backend is one or the other, and a digest of
// either kind changes whenever the state does.
func (r *Runner) stateDigest(ctx context.Context, w *workspace) (string, error) {
	data, ok, err := w.readCheckpoint()
	if err != nil {
		return "", fmt.Errorf("stack %s: read the state: %w", w.Name, err)
	}
	if !ok {
		out, err := r.pulumi(ctx, w, call{what: "export state"}, "stack", "export", "--stack", w.Stack)
		if err != nil {
			return "", fmt.Errorf("stack %s: %w", w.Name, err)
		}
		data = []byte(out)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// planDigest is the hex SHA-256 of w's plan id: the plans directory is
// the program's to replace, w's state directory is not.
func planDigest(w *workspace, id string) (string, error) {
	data, err := readIn(w.dir, filepath.Join(filepath.Base(w.planDir()), id+".json"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// ownPlanDigest makes w's plan id mode 0600, through the file it opened
// (never a link), and digests it.
func ownPlanDigest(w *workspace, id string) (string, error) {
	f, err := openRegular(w.dir, filepath.Join(filepath.Base(w.planDir()), id+".json"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DiscardPlan deletes the plan id of the stack name; one that is gone is
// no error.
func (r *Runner) DiscardPlan(name, id string) error {
	if !validPlanID(id) {
		return fmt.Errorf("stack %s: invalid plan id %q", name, id)
	}
	if err := validateNames(model.Workspace{Name: name, Stack: "x", ProjectDir: "x"}); err != nil {
		return err
	}
	w := &workspace{Workspace: model.Workspace{Name: name}, dir: filepath.Join(r.opts.DataDir, "workspaces", name)}
	if err := os.Remove(w.planPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stack %s: discard plan %s: %w", name, id, err)
	}
	return nil
}

var _ daemon.PlanDiscarder = (*Runner)(nil)
