package preview

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/scrub"
)

// maxLog bounds what a preview's log keeps in memory; the store keeps
// its own limit.
const maxLog = 4 << 20

// preview runs the preview of target t, records it in the stack's
// history and returns it. It waits for a worker slot first: updates of
// the reconcile loop go before previews.
func (p *Previewer) preview(ctx context.Context, pr *pullRequest, ev review.Event, i int, t target) review.Preview {
	pv := review.Preview{Stack: t.stack.Name, Result: review.Cancelled, New: t.new, Unresolved: t.unresolved}
	release, err := p.opts.Daemon.AcquireSlot(ctx)
	if err != nil {
		p.setPreview(pr, i, pv)
		return pv
	}
	defer release()
	start := time.Now()
	pv.Result = review.Running
	res := p.resolve(ctx, t)
	// The stack's secrets are scrubbed from this preview only: a pull
	// request's manifests may call any text a secret.
	red := p.opts.Daemon.Redactor().With(res.secrets...)
	commit, u, err := p.begin(ctx, ev, t, res, start)
	if err != nil {
		pv.Result, pv.Error = review.Failed, red.Clean(err.Error())
		p.setPreview(pr, i, pv)
		p.finished(ev, pv)
		return pv
	}
	pv.Update = u.ID
	p.setPreview(pr, i, pv)

	log, out, runErr := p.run(ctx, ev, t, res, commit, red)
	pv.Duration = elapsed(start)
	pv.Changes = out.Changes
	pv.Diff = string(log)
	u.EndTime, u.Changes, u.State = time.Now(), out.Changes, model.UpdateSucceeded
	switch {
	case ctx.Err() != nil:
		pv.Result, u.State, u.Message = review.Cancelled, model.UpdateAborted, "superseded by a newer commit, or the pull request closed"
	case runErr != nil:
		pv.Result, u.State = review.Failed, model.UpdateFailed
		pv.Error = red.Clean(runErr.Error())
		u.Message = pv.Error
	default:
		pv.Result = review.Succeeded
		pv.Denied, pv.Warnings = p.judge(ctx, ev, t, commit, out, red)
		if wait, why := gate.NeedsApproval(t.stack.Spec.ApprovalOr(p.opts.Approval), out.Steps); wait {
			pv.Approval = why
		}
	}
	if err := p.history(ev.Key()).PutLog(u.ID, log); err != nil {
		p.log.Error("cannot store a preview's log", "update", u.ID, "err", err)
	}
	if err := p.history(ev.Key()).PutUpdate(u); err != nil {
		p.log.Error("cannot record a preview", "update", u.ID, "err", err)
	}
	p.setPreview(pr, i, pv)
	p.finished(ev, pv)
	return pv
}

// resolved is what the daemon resolved of a target's stack, once per
// preview: its source, its workspace, the values to scrub, or why not.
type resolved struct {
	src     model.GitSource
	ws      model.Workspace
	secrets []string
	err     error
}

func (p *Previewer) resolve(ctx context.Context, t target) resolved {
	var r resolved
	r.src, r.ws, r.secrets, r.err = p.opts.Daemon.Resolve(ctx, t.cfg, t.stack)
	if r.err == nil {
		r.err = t.refused
	}
	return r
}

// begin records the preview's start at the commit its program comes from.
func (p *Previewer) begin(ctx context.Context, ev review.Event, t target, r resolved, start time.Time) (string, model.Update, error) {
	commit, err := p.programCommit(ctx, ev, t, r)
	if err != nil {
		return "", model.Update{}, err
	}
	u, err := p.history(ev.Key()).BeginUpdate(model.Update{Stack: t.stack.Name, Type: model.UpdatePreview,
		Reason: fmt.Sprintf("Preview of pull request #%d", ev.Number), Commit: commit, PullRequest: ev.Number,
		StartTime: start, State: model.UpdateRunning, Node: p.opts.Node})
	if err != nil {
		return "", model.Update{}, fmt.Errorf("record the preview: %w", err)
	}
	return commit, u, nil
}

// programCommit is the commit t's program is previewed at: the pull
// request's head, or, for a manifests change, the stack's own commit.
func (p *Previewer) programCommit(ctx context.Context, ev review.Event, t target, r resolved) (string, error) {
	s := &t.stack.Spec
	switch {
	case t.head:
		return ev.HeadSHA, nil
	case s.ProgramRef != nil:
		return "", nil
	case s.Commit != "":
		return s.Commit, nil
	}
	if r.err != nil {
		return "", r.err
	}
	return p.opts.Fetcher.Resolve(ctx, r.src)
}

// run checks the program out into the preview's own work dir and runs
// the preview there. It returns the log scrubbed by red, the result and
// error.
func (p *Previewer) run(ctx context.Context, ev review.Event, t target, r resolved, commit string, red *scrub.Redactor) ([]byte, model.Result, error) {
	dir := p.stackDir(ev, t.stack.Name)
	defer os.RemoveAll(dir)
	if r.err != nil {
		return nil, model.Result{}, r.err
	}
	ws := r.ws
	var err error
	if ws.ProjectDir, err = p.program(ctx, ev, t, r.src, commit, dir); err != nil {
		return nil, model.Result{}, err
	}
	ws.WorkDir = dir
	if t.new {
		if err := ownBackend(&ws, dir); err != nil {
			return nil, model.Result{}, err
		}
	}
	var buf bytes.Buffer
	w := red.Writer(&limitWriter{w: &buf, n: maxLog})
	if t.new {
		fmt.Fprintln(w, "stackd: a stack the pull request adds is previewed on an empty backend of its own, whatever backend its manifest names")
	}
	if len(t.unresolved) > 0 {
		fmt.Fprintf(w, "stackd: not resolved in a preview, as the config in force does not grant them to this stack (a placeholder stands in): %s\n",
			strings.Join(t.unresolved, ", "))
	}
	s := &t.stack.Spec
	op := model.Operation{Workspace: ws, Type: model.UpdatePreview, ReadOnly: true, Diff: true, Log: w,
		Refresh: s.Refresh, Targets: s.Targets, TargetDependents: s.TargetDependents, Timeout: p.opts.Timeout,
		Message: fmt.Sprintf("stackd: preview of pull request #%d", ev.Number), Judged: p.opts.Policies != nil,
		Identity: p.identity(t, ev, commit)}
	res, runErr := p.opts.Runner.Run(ctx, op)
	w.Close()
	return buf.Bytes(), res, runErr
}

// identity is the cloud credentials request of a pull request's preview
// of t: what the config in force gives the stack, never what its
// proposed spec names (the pull request must not choose the role its
// code runs with), and nothing for a stack the pull request adds. The
// runner gives it the read scope.
func (p *Previewer) identity(t target, ev review.Event, commit string) *model.IdentityRequest {
	cur := p.opts.Daemon.Config()
	if cur == nil || t.new {
		return nil
	}
	base := cur.Stack(t.stack.Name)
	if base == nil {
		return nil
	}
	// The repository is the one the preview fetches: a pull request to
	// the manifests may name another.
	req := resolve.Identity(base.Spec.Credentials, base.Labels, t.stack.Spec.ProjectRepo, commit, nil)
	if req != nil {
		req.PullRequest, req.Author = ev.Number, ev.Author
	}
	return req
}

// program puts t's program in dir and returns its project directory.
func (p *Previewer) program(ctx context.Context, ev review.Event, t target, src model.GitSource, commit, dir string) (string, error) {
	if ref := t.stack.Spec.ProgramRef; ref != nil {
		prog := t.cfg.Programs[ref.Name]
		if prog == nil {
			return "", fmt.Errorf("program %q is not in the config", ref.Name)
		}
		return prog.WriteProject(filepath.Join(dir, "program"))
	}
	if t.head {
		src.Ref, src.Shallow = ev.HeadRef(), true
	}
	return p.opts.Fetcher.Checkout(ctx, src, commit, filepath.Join(dir, "src"))
}

// judge evaluates the policies on a preview's steps, secret values in
// clear, failing closed, and returns their messages scrubbed by red and
// of those values.
func (p *Previewer) judge(ctx context.Context, ev review.Event, t target, commit string, res model.Result, red *scrub.Redactor) (deny, warn []review.Violation) {
	if p.opts.Policies == nil {
		return nil, nil
	}
	v := gate.JudgeSteps(ctx, p.opts.Policies, model.PolicyInput{Stack: t.stack.Name, Labels: t.stack.Labels,
		Commit: commit, PullRequest: ev.Number, Author: ev.Author, Steps: res.JudgedSteps()})
	v = v.Scrubbed(red.With(res.PolicySecrets...).Clean)
	if p.opts.Observer != nil {
		p.opts.Observer.PolicyEvaluated(t.stack.Name, v)
	}
	shown := func(vs []model.Violation) []review.Violation {
		var out []review.Violation
		for _, x := range vs {
			out = append(out, review.Violation{Policy: x.Policy, Message: x.Message})
		}
		return out
	}
	return shown(v.Deny), shown(v.Warn)
}

// clean scrubs every secret the daemon knows from text, for what a
// preview shows: its view, the forge's statuses and comment, its
// notification.
func (p *Previewer) clean(text string) string {
	return p.opts.Daemon.Redactor().Clean(text)
}

// finished counts a finished preview and tells of a failed one.
func (p *Previewer) finished(ev review.Event, pv review.Preview) {
	if p.opts.Observer != nil {
		p.opts.Observer.PreviewDone(pv.Result, pv.Duration)
	}
	if pv.Result == review.Failed {
		p.notifyFailed(ev, pv)
	}
}

// limitWriter keeps the first n bytes written to it.
type limitWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}
