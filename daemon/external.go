package daemon

import (
	"context"
	"sync"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/spec"
)

// Config is the config in force; nil before the first one.
func (d *Daemon) Config() *spec.Config {
	l := d.lock()
	defer l.unlock()
	return l.cfg
}

// ConfigInputs lists what a reload would read: each local path and each
// Git config source's newest checkout.
func (d *Daemon) ConfigInputs() ([]spec.Input, error) {
	l := d.lock()
	defer l.unlock()
	inputs, _, err := l.inputs()
	return inputs, err
}

// Resolve resolves stack s of cfg as an operation would, for work outside
// the reconcile loop (a pull request's preview): its Git source with
// credentials (none for a programRef), its workspace without a project
// directory, and the values to scrub from what it shows.
func (d *Daemon) Resolve(ctx context.Context, cfg *spec.Config, s *spec.Stack) (model.GitSource, model.Workspace, []string, error) {
	var secrets []string
	refs := d.refSources(ctx, job{cfg: cfg, stack: s}, &secrets)
	var src model.GitSource
	if s.Spec.ProgramRef == nil {
		var err error
		if src, err = resolve.GitSource(cfg, s, refs, d.opts.HostPaths); err != nil {
			return model.GitSource{}, model.Workspace{}, nil, err
		}
		if a := src.Auth; a != nil {
			secrets = append(secrets, a.Secrets()...)
		}
	}
	ws, more, err := resolve.Workspace(cfg, s, "", refs)
	if err == nil {
		err = d.opts.HostPaths.CheckStackBackend(s, ws.Backend, ws.Env)
	}
	return src, ws, append(secrets, more...), err
}

// StackBackend is the backend stack s of cfg names, with d's reference
// sources (see spec.Config.StackBackend); another stack's output is not
// read for it.
func (d *Daemon) StackBackend(cfg *spec.Config, s *spec.Stack) (string, error) {
	refs := d.opts.Refs
	refs.StackOutput = nil
	return cfg.StackBackend(s, refs)
}

// AcquireSlot waits until work outside the reconcile loop may start: fewer
// than MaxConcurrent operations run, the daemon is not paused, and no
// stack waits for a worker (updates go first). The work counts as a
// running operation until release is called.
func (d *Daemon) AcquireSlot(ctx context.Context) (release func(), err error) {
	for {
		l := d.lock()
		if l.running < l.opts.MaxConcurrent && !l.paused && len(l.starved) == 0 {
			l.running++
			l.unlock()
			return sync.OnceFunc(l.releaseSlot), nil
		}
		wake := l.slotFreed
		l.unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (d *Daemon) releaseSlot() {
	l := d.lock()
	defer l.unlock()
	l.running--
	l.wakeWaiting()
	l.freeSlot()
}

// freeSlot wakes the callers of AcquireSlot to look again.
func (d locked) freeSlot() {
	close(d.slotFreed)
	d.slotFreed = make(chan struct{})
}
