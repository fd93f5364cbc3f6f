package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/model"
)

// maxPreviewDiff bounds the diff a preview keeps.
const maxPreviewDiff = 1 << 20

// previewTimeout bounds a preview when no operation timeout is set.
const previewTimeout = 30 * time.Minute

// ErrPreviewRefused is wrapped by PreviewNow for a stack that cannot be
// previewed now (one runs already, the stack left the config, another
// replica holds it).
var ErrPreviewRefused = errors.New("cannot preview the stack now")

// PreviewStore keeps the last StackPreview of each stack; the BoltDB and
// the etcd stores implement it as part of Store. DeleteStack deletes it.
type PreviewStore interface {
	PutPreview(stack string, p model.StackPreview) error
	// Preview reads it; the error wraps ErrNotFound when there is none.
	Preview(stack string) (model.StackPreview, error)
}

// PreviewNow starts a read-only preview of the named stack at the latest
// commit of its source, in the background, and returns at once; the
// result is read with LastPreview. It runs while the daemon is paused
// too, never waits for a worker, and never changes the stack's status,
// history or resources: the runner previews a copy of the stack's state.
func (d *Daemon) PreviewNow(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stacks[name]
	switch {
	case st == nil:
		return ErrUnknownStack
	case st.stack == nil:
		return fmt.Errorf("stack %s left the config: %w", name, ErrPreviewRefused)
	case !d.acts(st):
		return fmt.Errorf("stack %s is held by another replica, which previews it: %w", name, ErrPreviewRefused)
	case st.previewing:
		return fmt.Errorf("stack %s: a preview runs already: %w", name, ErrPreviewRefused)
	}
	st.previewing = true
	j := job{st: st, stack: st.stack, cfg: d.cfg, typ: model.UpdatePreview}
	d.workWG.Add(1)
	go func() {
		defer d.workWG.Done()
		d.previewNow(d.opCtx, j)
		d.mu.Lock()
		st.previewing = false
		d.mu.Unlock()
	}()
	return nil
}

// LastPreview returns the named stack's last preview; ErrNotFound
// (wrapped) when it never had one.
func (d *Daemon) LastPreview(name string) (model.StackPreview, error) {
	d.mu.Lock()
	st := d.stacks[name]
	d.mu.Unlock()
	if st == nil {
		return model.StackPreview{}, ErrUnknownStack
	}
	p, err := d.opts.Store.Preview(name)
	if err != nil {
		return model.StackPreview{}, fmt.Errorf("stack %s: last preview: %w", name, err)
	}
	return p, nil
}

// previewNow runs j's preview and records it: running first, then its
// outcome.
func (d *Daemon) previewNow(ctx context.Context, j job) {
	name := j.stack.Name
	p := model.StackPreview{Time: time.Now(), State: model.UpdateRunning}
	d.putPreview(name, p)
	var buf bytes.Buffer
	res, commit, err := d.runPreviewNow(ctx, j, &buf)
	p.Commit, p.Duration, p.Changes, p.State = commit, time.Since(p.Time).Round(time.Millisecond), res.Changes, model.UpdateSucceeded
	if err != nil {
		p.State, p.Message = model.UpdateFailed, d.red.Clean(err.Error())
	}
	p.Diff = string(model.TruncateLog(buf.Bytes(), maxPreviewDiff))
	d.putPreview(name, p)
	d.log.Info("preview finished", "stack", name, "commit", commit, "state", p.State, "changes", p.Changes)
}

// runPreviewNow checks the latest commit out into a work dir of its own
// and previews it read-only, writing the scrubbed output to w.
func (d *Daemon) runPreviewNow(ctx context.Context, j job, w *bytes.Buffer) (model.Result, string, error) {
	src, ws, secrets, err := d.Resolve(ctx, j.cfg, j.stack)
	if err != nil {
		return model.Result{}, "", err
	}
	red := d.red.With(secrets...)
	dir := filepath.Join(d.opts.DataDir, "preview-now", j.stack.Name)
	defer os.RemoveAll(dir)
	commit, project, err := d.previewProgram(ctx, j, src, dir)
	if err != nil {
		return model.Result{}, commit, err
	}
	ws.ProjectDir, ws.WorkDir = project, dir
	sw := red.Writer(w)
	defer sw.Close()
	s := &j.stack.Spec
	op := model.Operation{Workspace: ws, Type: model.UpdatePreview, ReadOnly: true, Diff: true, Log: sw,
		Refresh: s.Refresh, Targets: s.Targets, TargetDependents: s.TargetDependents,
		Timeout: cmpDuration(s.OperationTimeout.Duration, d.opts.OpTimeout, previewTimeout)}
	res, err := d.opts.Runner.Run(ctx, op)
	if err != nil {
		return res, commit, errors.New(red.Clean(err.Error()))
	}
	return res, commit, nil
}

// previewProgram puts j's program at its latest commit (the branch's head
// asked of the remote afresh) in dir, and returns the commit and the
// project directory.
func (d *Daemon) previewProgram(ctx context.Context, j job, src model.GitSource, dir string) (string, string, error) {
	s := &j.stack.Spec
	if ref := s.ProgramRef; ref != nil {
		prog := j.cfg.Programs[ref.Name]
		if prog == nil {
			return "", "", fmt.Errorf("program %q is not in the config", ref.Name)
		}
		project, err := prog.WriteProject(filepath.Join(dir, "program"))
		return prog.Revision(), project, err
	}
	commit := s.Commit
	if commit == "" {
		d.opts.Fetcher.Forget(src.URL)
		var err error
		if commit, err = d.opts.Fetcher.Resolve(ctx, src); err != nil {
			return "", "", fmt.Errorf("resolve %s: %w", spec.RedactURL(src.URL), err)
		}
	}
	project, err := d.opts.Fetcher.Checkout(ctx, src, commit, filepath.Join(dir, "src"))
	return commit, project, err
}

// putPreview records p as stack's last preview; a failure is logged.
func (d *Daemon) putPreview(stack string, p model.StackPreview) {
	if err := d.opts.Store.PutPreview(stack, p); err != nil {
		d.storeError("cannot record the stack's preview", stack, err)
	}
}

// cmpDuration is the first of ds above zero.
func cmpDuration(ds ...time.Duration) time.Duration {
	for _, d := range ds {
		if d > 0 {
			return d
		}
	}
	return 0
}
