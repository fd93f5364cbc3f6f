package preview

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/daemon/window"
)

// target is one stack to preview and where its program comes from.
type target struct {
	stack *spec.Stack
	cfg   *spec.Config // the config the stack's spec comes from
	// head is set when the program is the pull request's head commit;
	// otherwise it is the stack's own source (a manifests change).
	head bool
	new  bool // added by the pull request's manifests
	// unresolved are the references of a proposed spec that the config
	// in force does not grant the stack: the target's stack reads
	// nothing for them.
	unresolved []string
	// refused says why the target is not previewed (movedState).
	refused error
}

// round previews the stacks ev's head commit changes and reports on f.
// A round whose ctx ends (a newer push, the pull request closed, stackd
// stopping) writes no comment: the next round does.
func (p *Previewer) round(ctx context.Context, pr *pullRequest, ev review.Event, f review.Forge) {
	defer os.RemoveAll(filepath.Join(p.opts.DataDir, "previews", workDir(ev)))
	if !p.checkAuthor(ctx, pr, &ev, f) {
		return
	}
	files, err := f.ChangedFiles(ctx, ev.Repo, ev.Number)
	if err != nil {
		p.roundFailed(ctx, pr, ev, f, fmt.Errorf("list the changed files: %w", err))
		return
	}
	targets, removed, err := p.targets(ctx, ev, files)
	if err != nil {
		p.setStatus(ctx, f, ev, review.Status{Context: "stackd/config", State: review.Failure,
			Description: "The manifests at this commit do not load"})
		p.roundFailed(ctx, pr, ev, f, err)
		return
	}
	if len(targets) == 0 && len(removed) == 0 && len(p.reviewsOf(pr)) == 0 {
		p.log.Info("pull request changes no stack's files", "pullRequest", ev.Key(), "files", len(files))
		return
	}
	previews := make([]review.Preview, len(targets))
	for i, t := range targets {
		previews[i] = review.Preview{Stack: t.stack.Name, Result: review.Queued, New: t.new, Unresolved: t.unresolved}
	}
	p.setView(pr, func(v *review.PullRequest) { v.Previews, v.Removed = previews, removed })
	for _, t := range targets {
		p.setStatus(ctx, f, ev, review.Status{Context: "stackd/" + t.stack.Name, State: review.Pending,
			Description: "Preview queued", TargetURL: p.prLink()})
	}
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			pv := p.preview(ctx, pr, ev, i, t)
			p.report(ctx, f, ev, pv)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if cur := p.opts.Daemon.Config(); cur != nil {
		p.reviewRound(ctx, pr, ev, cur, review.Affected(cur, ev, files))
	}
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	reviews, refused := slices.Clone(pr.view.ReviewStacks), pr.view.ReviewRefused
	p.mu.Unlock()
	p.comment(ctx, pr, ev, f, review.Report{Commit: ev.HeadSHA, Previews: p.previews(pr), Removed: removed, LinkOf: p.link,
		Waits: windowWaits(targets, time.Now()), ReviewStacks: reviews, ReviewRefused: refused})
}

// windowWaits lists the targets whose change the change windows of
// their config would hold back at now, as they would after a merge.
func windowWaits(targets []target, now time.Time) []review.WindowWait {
	var out []review.WindowWait
	for _, t := range targets {
		if t.stack.Spec.Preview {
			continue // changes nothing: never held back
		}
		v := window.Check(t.cfg.ChangeWindows, window.Stack{Name: t.stack.Name, Labels: t.stack.Labels}, spec.ChangeCommit, now)
		if !v.Open {
			out = append(out, review.WindowWait{Stack: t.stack.Name, Windows: v.Names(), Until: v.Until()})
		}
	}
	return out
}

// roundFailed reports a round that could preview nothing.
func (p *Previewer) roundFailed(ctx context.Context, pr *pullRequest, ev review.Event, f review.Forge, err error) {
	if ctx.Err() != nil {
		return
	}
	msg := p.clean(err.Error())
	p.log.Warn("cannot preview a pull request", "pullRequest", ev.Key(), "err", msg)
	p.setView(pr, func(v *review.PullRequest) { v.Error = msg })
	p.comment(ctx, pr, ev, f, review.Report{Commit: ev.HeadSHA, Error: msg})
}

// targets lists the stacks to preview: those whose files the pull
// request changes, with the spec in force, and those whose manifests it
// adds or changes (when its repository is a Git config source), with the
// spec at its head. removed names the stacks its manifests remove.
func (p *Previewer) targets(ctx context.Context, ev review.Event, files []string) ([]target, []string, error) {
	cur := p.opts.Daemon.Config()
	if cur == nil {
		return nil, nil, errors.New("stackd has no config yet")
	}
	byName := map[string]target{}
	var order []string
	add := func(t target) {
		if _, ok := byName[t.stack.Name]; !ok {
			order = append(order, t.stack.Name)
		}
		byName[t.stack.Name] = t
	}
	proposals, removed, err := p.proposedConfig(ctx, ev, files, cur)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range review.Affected(cur, ev, files) {
		add(target{stack: s, cfg: cur, head: true})
	}
	for _, c := range proposals {
		for _, s := range c.changed {
			head := len(review.Affected(&spec.Config{Stacks: []*spec.Stack{s}}, ev, files)) > 0
			base := cur.Stack(s.Name)
			unresolved := ungranted(cur, base, c.cfg, s)
			t := target{stack: withhold(s, unresolved), cfg: c.cfg, head: head, new: c.added[s.Name], unresolved: unresolved}
			if base != nil {
				t.refused = p.movedState(cur, base, c.cfg, t.stack)
			}
			add(t)
		}
	}
	out := make([]target, 0, len(order))
	for _, name := range order {
		out = append(out, byName[name])
	}
	return out, removed, nil
}

// previews is a copy of pr's previews.
func (p *Previewer) previews(pr *pullRequest) []review.Preview {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]review.Preview(nil), pr.view.Previews...)
}

// setPreview replaces preview i of pr.
func (p *Previewer) setPreview(pr *pullRequest, i int, pv review.Preview) {
	p.setView(pr, func(v *review.PullRequest) {
		if i < len(v.Previews) && v.Previews[i].Stack == pv.Stack {
			v.Previews[i] = pv
		}
	})
}

// report sets pv's commit status; that of a preview whose round ended
// first says why (endStatus).
func (p *Previewer) report(ctx context.Context, f review.Forge, ev review.Event, pv review.Preview) {
	if pv.Result == review.Cancelled || ctx.Err() != nil {
		p.endStatus(ctx, f, ev, pv.Stack)
		return
	}
	st := review.Status{Context: "stackd/" + pv.Stack, State: review.Success, TargetURL: p.link(pv),
		Description: "Preview: " + changeSummary(pv.Changes)}
	switch {
	case pv.Result == review.Failed:
		st.State, st.Description = review.Failure, "Preview failed: "+review.FirstLine(pv.Error)
	case len(pv.Denied) > 0:
		st.State, st.Description = review.Failure, "Denied by policy: "+review.FirstLine(pv.Denied[0].Message)
	}
	p.setStatus(ctx, f, ev, st)
}

// endStatus sets the final status of stack's preview when ctx ended
// for a newer head commit or the pull request's closing: "Superseded by
// <sha>" or "Pull request closed", in state review.Error. It writes
// with a context of its own, as the round's has ended.
func (p *Previewer) endStatus(ctx context.Context, f review.Forge, ev review.Event, stack string) {
	var e ended
	if !errors.As(context.Cause(ctx), &e) {
		return
	}
	wctx, cancel := context.WithTimeout(p.ctx, endStatusTimeout)
	defer cancel()
	p.setStatus(wctx, f, ev, review.Status{Context: "stackd/" + stack, State: review.Error, Description: e.why})
}

// endStatusTimeout bounds the write of a status that ends a preview.
const endStatusTimeout = time.Minute

func (p *Previewer) setStatus(ctx context.Context, f review.Forge, ev review.Event, st review.Status) {
	st.Description = p.clean(st.Description)
	if err := f.SetStatus(ctx, ev.Repo, ev.HeadSHA, st); err != nil && ctx.Err() == nil {
		p.log.Warn("cannot set a commit status", "pullRequest", ev.Key(), "context", st.Context, "err", err)
	}
}

// comment writes the pull request's one comment.
func (p *Previewer) comment(ctx context.Context, pr *pullRequest, ev review.Event, f review.Forge, r review.Report) {
	p.mu.Lock()
	id := pr.comment
	p.mu.Unlock()
	r.Error, r.Previews = p.clean(r.Error), slices.Clone(r.Previews)
	r.Destroying = p.destroying(r.Removed)
	for i := range r.Previews {
		r.Previews[i].Error, r.Previews[i].Diff = p.clean(r.Previews[i].Error), p.clean(r.Previews[i].Diff)
	}
	id, err := f.UpsertComment(ctx, ev.Repo, ev.Number, review.Marker, review.Comment(r, f.MaxComment()), id)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("cannot write the pull request's comment", "pullRequest", ev.Key(), "err", err)
		}
		return
	}
	p.mu.Lock()
	pr.comment = id
	p.mu.Unlock()
	p.save(pr)
	p.log.Info("pull request previewed", "pullRequest", ev.Key(), "commit", short(ev.HeadSHA), "stacks", len(r.Previews))
}

// destroying says which of the removed stacks a merge destroys, by the
// config in force, and what may hold each destroy back: the approval of
// the stack or of --approval, and the policies.
func (p *Previewer) destroying(removed []string) map[string]string {
	cur := p.opts.Daemon.Config()
	if cur == nil || len(removed) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, name := range removed {
		s := cur.Stack(name)
		if s == nil || !s.Spec.DestroyOnFinalize || s.Spec.Preview {
			continue
		}
		var holds []string
		if s.Spec.ApprovalOr(p.opts.Approval).Gates() {
			holds = append(holds, "once approved")
		}
		if p.opts.Policies != nil {
			holds = append(holds, "if the policies allow it")
		}
		out[name] = strings.Join(holds, " and ")
	}
	return out
}

// link is the address of pv's page in the UI.
func (p *Previewer) link(pv review.Preview) string {
	if p.opts.UIURL == "" || pv.Update == "" {
		return ""
	}
	return strings.TrimSuffix(p.opts.UIURL, "/") + "/previews/" + url.PathEscape(pv.Update)
}

// prLink is the address of the UI's page of pull requests.
func (p *Previewer) prLink() string {
	if p.opts.UIURL == "" {
		return ""
	}
	return strings.TrimSuffix(p.opts.UIURL, "/") + "/previews"
}

// changeSummary is "+1 ~2 -0 ±0".
func changeSummary(c map[string]int) string {
	return fmt.Sprintf("+%d ~%d -%d ±%d", c["create"], c["update"], c["delete"], c["replace"])
}

// elapsed is the duration since start, for views.
func elapsed(start time.Time) time.Duration { return time.Since(start).Round(time.Millisecond) }

// stackDir is the work dir of one stack's preview of ev.
func (p *Previewer) stackDir(ev review.Event, stack string) string {
	return filepath.Join(p.opts.DataDir, "previews", workDir(ev), stack)
}
