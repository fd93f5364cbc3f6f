// Package previewnow runs a "preview now" of a stack: its program at the
// latest commit of its source, checked out into a work dir of its own,
// previewed read-only with the diff. The reconcile loop (daemon) decides
// when one may run, resolves the stack and records the outcome; this
// package imports nothing of it.
package previewnow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// Timeout bounds a preview when no operation timeout is set.
const Timeout = 30 * time.Minute

// Fetcher and Runner are what a preview takes of the daemon's Fetcher
// and Runner.
type (
	Fetcher interface {
		Resolve(ctx context.Context, src model.GitSource) (string, error)
		Checkout(ctx context.Context, src model.GitSource, commit, dir string) (string, error)
		Forget(url string)
	}
	Runner interface {
		Run(ctx context.Context, op model.Operation) (model.Result, error)
	}
)

// Preview is one preview of stack Stack of Config, resolved: its Git
// source (none for a programRef) and its workspace without a project
// directory.
type Preview struct {
	Config *spec.Config
	Stack  *spec.Stack
	Source model.GitSource
	Work   model.Workspace
	// Dir is the preview's own work dir, removed once it ran.
	Dir string
	// OpTimeout is the daemon's operation timeout; the stack's own comes
	// first, Timeout when neither is set.
	OpTimeout time.Duration
	Fetcher   Fetcher
	Runner    Runner
	// Redactor scrubs the output and the error: the daemon's, with the
	// values the stack's resolution read.
	Redactor *scrub.Redactor
}

// Run checks the latest commit out into p.Dir and previews it read-only,
// writing the scrubbed output to w. It returns the result and the commit
// previewed.
func (p Preview) Run(ctx context.Context, w io.Writer) (model.Result, string, error) {
	defer os.RemoveAll(p.Dir)
	commit, project, err := p.program(ctx)
	if err != nil {
		return model.Result{}, commit, err
	}
	ws := p.Work
	ws.ProjectDir, ws.WorkDir = project, p.Dir
	sw := p.Redactor.Writer(w)
	defer sw.Close()
	s := &p.Stack.Spec
	op := model.Operation{Workspace: ws, Type: model.UpdatePreview, ReadOnly: true, Diff: true, Log: sw,
		Refresh: s.Refresh, Targets: s.Targets, TargetDependents: s.TargetDependents,
		Timeout:  cmpDuration(s.OperationTimeout.Duration, p.OpTimeout, Timeout),
		Identity: resolve.Identity(s.Credentials, p.Stack.Labels, s.ProjectRepo, commit, nil)}
	res, err := p.Runner.Run(ctx, op)
	if err != nil {
		return res, commit, errors.New(p.Redactor.Clean(err.Error()))
	}
	return res, commit, nil
}

// program puts the stack's program at its latest commit (the branch's
// head asked of the remote afresh) in p.Dir, and returns the commit and
// the project directory.
func (p Preview) program(ctx context.Context) (string, string, error) {
	s, src := &p.Stack.Spec, p.Source
	if ref := s.ProgramRef; ref != nil {
		prog := p.Config.Programs[ref.Name]
		if prog == nil {
			return "", "", fmt.Errorf("program %q is not in the config", ref.Name)
		}
		project, err := prog.WriteProject(filepath.Join(p.Dir, "program"))
		return prog.Revision(), project, err
	}
	commit := s.Commit
	if commit == "" {
		p.Fetcher.Forget(src.URL)
		var err error
		if commit, err = p.Fetcher.Resolve(ctx, src); err != nil {
			return "", "", fmt.Errorf("resolve %s: %w", spec.RedactURL(src.URL), err)
		}
	}
	project, err := p.Fetcher.Checkout(ctx, src, commit, filepath.Join(p.Dir, "src"))
	return commit, project, err
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

// MaxDiff bounds the diff a preview keeps.
const MaxDiff = 1 << 20

// Resolver resolves a stack for a run: its Git source, its workspace and
// the secret values it read (the daemon's Resolve).
type Resolver func(ctx context.Context, cfg *spec.Config, s *spec.Stack) (model.GitSource, model.Workspace, []string, error)

// Record resolves p's stack with resolve, runs p and reports it to put
// twice: running first, then its outcome, which it returns. p's Source,
// Work and Redactor (then with the values resolve read) come from the
// resolution.
func (p Preview) Record(ctx context.Context, resolve Resolver, put func(model.StackPreview)) model.StackPreview {
	rec := model.StackPreview{Time: time.Now(), State: model.UpdateRunning}
	put(rec)
	var buf bytes.Buffer
	res, commit, err := p.resolveAndRun(ctx, resolve, &buf)
	rec.Commit, rec.Duration, rec.Changes, rec.State = commit, time.Since(rec.Time).Round(time.Millisecond), res.Changes, model.UpdateSucceeded
	if err != nil {
		rec.State, rec.Message = model.UpdateFailed, p.Redactor.Clean(err.Error())
	}
	rec.Diff = string(model.TruncateLog(buf.Bytes(), MaxDiff))
	put(rec)
	return rec
}

func (p Preview) resolveAndRun(ctx context.Context, resolve Resolver, w *bytes.Buffer) (model.Result, string, error) {
	src, ws, secrets, err := resolve(ctx, p.Config, p.Stack)
	if err != nil {
		return model.Result{}, "", err
	}
	p.Source, p.Work, p.Redactor = src, ws, p.Redactor.With(secrets...)
	return p.Run(ctx, w)
}
