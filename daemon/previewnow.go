package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/stackd/stackd/daemon/activity"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/previewnow"
)

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
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	switch {
	case st == nil:
		return ErrUnknownStack
	case st.stack == nil:
		return fmt.Errorf("stack %s left the config: %w", name, ErrPreviewRefused)
	case !l.acts(st):
		return fmt.Errorf("stack %s is held by another replica, which previews it: %w", name, ErrPreviewRefused)
	case st.act.Do(activity.Preview) != nil: // refused: one runs
		return fmt.Errorf("stack %s: a preview runs already: %w", name, ErrPreviewRefused)
	}
	j := job{st: st, stack: st.stack, cfg: l.cfg, typ: model.UpdatePreview}
	l.workWG.Add(1)
	go func() {
		defer d.workWG.Done()
		d.previewNow(d.opCtx, j)
		l := d.lock()
		l.move(st, activity.Previewed)
		l.unlock()
	}()
	return nil
}

// LastPreview returns the named stack's last preview; ErrNotFound
// (wrapped) when it never had one.
func (d *Daemon) LastPreview(name string) (model.StackPreview, error) {
	l := d.lock()
	st := l.stacks[name]
	l.unlock()
	if st == nil {
		return model.StackPreview{}, ErrUnknownStack
	}
	p, err := d.opts.Store.Preview(name)
	if err != nil {
		return model.StackPreview{}, fmt.Errorf("stack %s: last preview: %w", name, err)
	}
	return p, nil
}

// previewNow runs j's preview and records it (previewnow.Record).
func (d *Daemon) previewNow(ctx context.Context, j job) {
	name := j.stack.Name
	p := previewnow.Preview{Config: j.cfg, Stack: j.stack, Dir: filepath.Join(d.opts.DataDir, "preview-now", name),
		OpTimeout: d.opts.OpTimeout, Fetcher: d.opts.Fetcher, Runner: d.opts.Runner, Redactor: d.red}
	rec := p.Record(ctx, d.Resolve, func(p model.StackPreview) { d.putPreview(name, p) })
	d.log.Info("preview finished", "stack", name, "commit", rec.Commit, "state", rec.State, "changes", rec.Changes)
}

// putPreview records p as stack's last preview; a failure is logged.
func (d *Daemon) putPreview(stack string, p model.StackPreview) {
	if err := d.opts.Store.PutPreview(stack, p); err != nil {
		d.storeError("cannot record the stack's preview", stack, err)
	}
}
