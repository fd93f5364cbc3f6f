package preview

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/spec"
)

// Review stacks live in the views of their pull requests (and so in
// their records): a review stack is live from its first deploy until a
// destroy of it succeeds. Operations on one review stack run one at a
// time (reviewLock).

// reviewRound plans and runs what ev does to the review stacks of its
// pull request: the templates among stacks (those the changed files
// concern) get theirs created, the existing ones are updated.
func (p *Previewer) reviewRound(ctx context.Context, pr *pullRequest, ev review.Event, cur *spec.Config, stacks []*spec.Stack) {
	templates, touched := reviewTemplates(cur, stacks)
	if len(templates) == 0 && len(p.reviewsOf(pr)) == 0 {
		return
	}
	taken := map[string]bool{}
	for _, s := range cur.Stacks {
		taken[s.Name] = true
	}
	plan := review.PlanEvent(ev, templates, touched, p.boundedLive(pr), taken, p.opts.ReviewBounds, p.opts.ForkPRs)
	p.setView(pr, func(v *review.PullRequest) { v.ReviewRefused = plan.Refused })
	var wg sync.WaitGroup
	for _, st := range plan.Steps {
		wg.Go(func() {
			if st.Op == review.Destroy {
				p.destroyReview(ctx, pr, ev, st)
				return
			}
			p.deployReview(ctx, pr, ev, cur, cur.Stack(st.Template), templates[st.Template], st)
		})
	}
	wg.Wait()
}

// reviewTemplates are the template stacks of cfg by name, and the names
// of those among stacks.
func reviewTemplates(cfg *spec.Config, stacks []*spec.Stack) (map[string]review.Template, []string) {
	templates := map[string]review.Template{}
	for _, s := range cfg.Stacks {
		if rs := s.Spec.ReviewStacks; rs != nil && rs.Enabled && !s.Spec.Preview {
			templates[s.Name] = review.Template{Stack: s.Name, PulumiStack: s.Spec.Stack, TTL: rs.TTL.Duration, Max: rs.Max}
		}
	}
	var touched []string
	for _, s := range stacks {
		if _, ok := templates[s.Name]; ok {
			touched = append(touched, s.Name)
		}
	}
	return templates, touched
}

// deployReview runs an up of review stack st of template tmpl at ev's
// head commit, in a work dir of its own and the runner's state of st.
func (p *Previewer) deployReview(ctx context.Context, pr *pullRequest, ev review.Event, cfg *spec.Config, tmpl *spec.Stack, t review.Template, st review.Step) {
	unlock := p.reviewLock(st.Name)
	defer unlock()
	rs := review.ReviewStack{Name: st.Name, Template: st.Template, PulumiStack: st.PulumiStack, Op: st.Op,
		Result: review.Running, Commit: ev.HeadSHA, LastActivity: time.Now(), TTL: t.TTL}
	brk := p.takeStale(pr, st.Name)
	p.putReview(pr, rs)
	out, err := p.runReview(ctx, ev, cfg, tmpl, st, model.UpdateUp, ev.HeadSHA, brk)
	rs.Result, rs.Outputs = review.Succeeded, out
	// Events that came while it ran are activity.
	rs.LastActivity = later(rs.LastActivity, p.reviewOf(pr, st.Name).LastActivity)
	if err != nil {
		rs.Result, rs.Error = review.Failed, p.clean(err.Error())
		p.log.Warn("cannot deploy a review stack", "stack", st.Name, "pullRequest", ev.Key(), "err", rs.Error)
	} else {
		p.log.Info("review stack deployed", "stack", st.Name, "pullRequest", ev.Key(), "commit", short(ev.HeadSHA))
	}
	p.putReview(pr, rs)
	p.reviewDone(rs)
}

// destroyReview destroys review stack st of pull request ev and removes
// its Pulumi stack. The program is the commit it was last deployed at.
func (p *Previewer) destroyReview(ctx context.Context, pr *pullRequest, ev review.Event, st review.Step) {
	unlock := p.reviewLock(st.Name)
	defer unlock()
	rs := p.reviewOf(pr, st.Name)
	if rs.Op == review.Destroy && rs.Result == review.Succeeded {
		return // an expiry and a closing both asked
	}
	rs.Op, rs.Result, rs.Error, rs.Outputs = review.Destroy, review.Running, "", nil
	brk := p.takeStale(pr, st.Name)
	p.putReview(pr, rs)
	cfg := p.opts.Daemon.Config()
	tmpl := cfg.Stack(st.Template)
	var err error
	if tmpl == nil {
		err = fmt.Errorf("its template stack %s is no longer in the config: destroy it by hand", st.Template)
	} else {
		_, err = p.runReview(ctx, ev, cfg, tmpl, st, model.UpdateDestroy, rs.Commit, brk)
	}
	rs.Result = review.Succeeded
	if err != nil {
		rs.Result, rs.Error = review.Failed, p.clean(err.Error())
		p.log.Warn("cannot destroy a review stack", "stack", st.Name, "pullRequest", ev.Key(), "err", rs.Error)
		// It expires again reviewRetry from now: the destroy is retried.
		ttl := rs.TTL
		if ttl <= 0 {
			ttl = review.DefaultTTL
		}
		rs.LastActivity = time.Now().Add(reviewRetry - ttl)
	} else {
		p.log.Info("review stack destroyed", "stack", st.Name, "pullRequest", ev.Key(), "why", st.Why)
	}
	p.putReview(pr, rs)
	p.reviewDone(rs)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// reviewDone counts rs's finished operation; one that its context's end
// interrupted counts as failed.
func (p *Previewer) reviewDone(rs review.ReviewStack) {
	if p.opts.Observer != nil {
		p.opts.Observer.ReviewStackDone(rs.Op, rs.Result)
	}
}

// reviewRetry is how long after a failed destroy of an expired review
// stack it is tried again.
const reviewRetry = time.Minute

// runReview runs an operation of type typ on review stack st, with the
// program of template tmpl at commit of ev's head ref and the template's
// config with the overrides of its reviewStacks, and returns its outputs,
// scrubbed. breakLock breaks the Pulumi lock a replica that died during
// an operation of st left.
func (p *Previewer) runReview(ctx context.Context, ev review.Event, cfg *spec.Config, tmpl *spec.Stack, st review.Step, typ, commit string, breakLock bool) (map[string]string, error) {
	release, err := p.opts.Daemon.AcquireSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	rstack, err := tmpl.ForReview(st.Name, ev.Number)
	if err != nil {
		return nil, fmt.Errorf("the config of template %s: %w", tmpl.Name, err)
	}
	src, ws, secrets, err := p.opts.Daemon.Resolve(ctx, cfg, rstack)
	if err != nil {
		return nil, err
	}
	red := p.opts.Daemon.Redactor().With(secrets...)
	dir := filepath.Join(p.opts.DataDir, "reviews", st.Name)
	defer os.RemoveAll(dir)
	if ws.ProjectDir, err = p.program(ctx, ev, target{stack: tmpl, cfg: cfg, head: true}, src, commit, dir); err != nil {
		return nil, err
	}
	ws.Name, ws.Stack, ws.WorkDir, ws.UseLocalStackOnly = st.Name, st.PulumiStack, dir, false
	var buf bytes.Buffer
	w := red.Writer(&limitWriter{w: &buf, n: maxLog})
	defer w.Close()
	op := model.Operation{Workspace: ws, Type: typ, Timeout: p.opts.Timeout, Log: w, BreakLock: breakLock,
		Message: fmt.Sprintf("stackd: review stack of pull request #%d", ev.Number)}
	// The template's credentials, in force: the token names the review
	// stack, so that a trust policy pinned to the template's own stack
	// refuses it.
	if op.Identity = resolve.Identity(tmpl.Spec.Credentials, tmpl.Labels, tmpl.Spec.ProjectRepo, commit, nil); op.Identity != nil {
		op.Identity.PullRequest, op.Identity.Author = ev.Number, ev.Author
	}
	if typ == model.UpdateDestroy {
		op.Remove = true
	}
	res, err := p.opts.Runner.Run(ctx, op)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", red.Clean(err.Error()), lastLines(buf.String()))
	}
	out := map[string]string{}
	for k, v := range res.Outputs {
		out[k] = red.Clean(string(v))
	}
	return out, nil
}

// lastLines is the end of a log, for an error.
func lastLines(log string) string {
	const keep = 2000
	if len(log) > keep {
		log = "…" + log[len(log)-keep:]
	}
	return log
}

// closeReviews destroys the review stacks of pr, which closed, once the
// round in progress ended. A round of a newer event (the pull request
// reopened) waits for the destroys in turn.
func (p *Previewer) closeReviews(pr *pullRequest, ev review.Event) {
	p.mu.Lock()
	prev, fin := pr.done, make(chan struct{})
	pr.done = fin
	p.mu.Unlock()
	p.save(pr)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(fin)
		if prev != nil {
			select {
			case <-prev:
			case <-p.ctx.Done():
				return
			}
		}
		plan := review.PlanEvent(ev, nil, nil, liveOf(ev.Key(), p.reviewsOf(pr)), nil, review.Bounds{}, true)
		p.runDestroys(pr, ev, plan.Steps, true)
	}()
}

// runDestroys runs destroy steps of pr, writes its comment once they
// ended, and settles pr. work says that the destroys are ev's work (a
// closing, or a sweep in a cluster), which then ends.
func (p *Previewer) runDestroys(pr *pullRequest, ev review.Event, steps []review.Step, work bool) {
	ctx := p.lifeOf(pr)
	var wg sync.WaitGroup
	for _, st := range steps {
		wg.Go(func() { p.destroyReview(ctx, pr, ev, st) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the work runs again after the next start, or on another replica
	}
	if f, _, ok := p.opts.Forges.For(ev.URLs); ok && len(steps) > 0 {
		p.mu.Lock()
		r := review.Report{Commit: pr.view.HeadSHA, Previews: slices.Clone(pr.view.Previews), Removed: pr.view.Removed, LinkOf: p.link,
			ReviewStacks: slices.Clone(pr.view.ReviewStacks), ReviewRefused: pr.view.ReviewRefused}
		p.mu.Unlock()
		p.comment(ctx, pr, ev, f, r)
	}
	p.settle(pr, ev, work)
}

// settle forgets pr once it is closed and none of its review stacks is
// live, and deletes its record (in a cluster, its event too). Otherwise,
// when the destroys were ev's work and no newer event took pr over, the
// work is recorded as done and, in a cluster, the lease given up: a
// destroy that failed is tried again as an expired one.
func (p *Previewer) settle(pr *pullRequest, ev review.Event, work bool) {
	p.mu.Lock()
	key := pr.view.Key
	gone := pr.view.Closed && p.prs[key] == pr && len(liveOf(key, pr.view.ReviewStacks)) == 0
	if gone {
		delete(p.prs, key)
		if pr.lose != nil {
			pr.lose() // frees it: no destroy is left
		}
	}
	work = work && !gone && pr.ev.WorkKey() == ev.WorkKey()
	if work {
		pr.ended = ev.WorkKey()
	}
	p.mu.Unlock()
	switch {
	case gone:
		p.log.Info("closed pull request forgotten: its review stacks are destroyed", "pullRequest", key)
		p.drop(key)
	case work:
		p.save(pr)
		if p.opts.Shared != nil {
			p.opts.Shared.ReleasePullRequest(key, ev.WorkKey())
		}
	}
}

// expireReviews destroys the review stacks whose pull request has been
// quiet for their TTL, until Stop: it wakes at the next expiry, or when
// a review stack changed (p.reviewWake). In a cluster, where the other
// replicas change them too, it reads them again every sharedExpiryPoll.
func (p *Previewer) expireReviews() {
	defer p.wg.Done()
	for {
		next := review.NextExpiry(p.liveReviews())
		if p.opts.Shared != nil && (next.IsZero() || time.Until(next) > sharedExpiryPoll) {
			next = time.Now().Add(sharedExpiryPoll)
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			fire = timer.C
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.reviewWake:
		case <-fire:
			p.expire(time.Now())
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// sharedExpiryPoll is how often a replica of a cluster reads the review
// stacks of every pull request for their expiry.
const sharedExpiryPoll = 30 * time.Second

// expire destroys the review stacks expired at now, those of one pull
// request together. In a cluster it asks the holder of each pull request
// with expired review stacks to (sweep).
func (p *Previewer) expire(now time.Time) {
	if p.opts.Shared != nil {
		p.sweep(now)
		return
	}
	for _, pr := range p.reviewHolders() {
		p.mu.Lock()
		ev := pr.ev
		p.mu.Unlock()
		if steps := p.expiredSteps(pr, now); len(steps) > 0 {
			p.runDestroys(pr, ev, steps, false)
		}
	}
}

// expiredSteps are the destroys of pr's review stacks expired at now.
func (p *Previewer) expiredSteps(pr *pullRequest, now time.Time) []review.Step {
	p.mu.Lock()
	live := liveOf(pr.ev.Key(), pr.view.ReviewStacks)
	p.mu.Unlock()
	var steps []review.Step
	for _, l := range review.Expired(live, now) {
		steps = append(steps, review.Step{Op: review.Destroy, Name: l.Name, PulumiStack: l.PulumiStack,
			Template: l.Template, Why: "its pull request was quiet for " + l.TTL.String()})
	}
	return steps
}

// reviewHolders are the pull requests that may have live review stacks:
// the open ones, and the closed ones whose review stacks are not all
// destroyed yet.
func (p *Previewer) reviewHolders() []*pullRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pullRequest, 0, len(p.prs))
	for _, pr := range p.prs {
		out = append(out, pr)
	}
	return out
}

// liveReviews are the live review stacks of every pull request: in a
// cluster, those their records tell.
func (p *Previewer) liveReviews() []review.Live {
	if p.opts.Shared != nil {
		return p.sharedLive("")
	}
	holders := p.reviewHolders()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []review.Live
	for _, pr := range holders {
		out = append(out, liveOf(pr.ev.Key(), pr.view.ReviewStacks)...)
	}
	return out
}

// liveOf are the live review stacks among rss, of pull request key.
func liveOf(key string, rss []review.ReviewStack) []review.Live {
	var out []review.Live
	for _, rs := range rss {
		if rs.Op == review.Destroy && rs.Result == review.Succeeded {
			continue
		}
		i := strings.LastIndexByte(key, '#')
		number, _ := strconv.Atoi(key[i+1:])
		out = append(out, review.Live{Name: rs.Name, PulumiStack: rs.PulumiStack, Template: rs.Template, PullRequest: key,
			Repo: key[:i], Number: number, HeadSHA: rs.Commit, LastActivity: rs.LastActivity, TTL: rs.TTL})
	}
	return out
}

// reviewsOf is a copy of pr's review stacks.
func (p *Previewer) reviewsOf(pr *pullRequest) []review.ReviewStack {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(pr.view.ReviewStacks)
}

// reviewOf is pr's review stack name.
func (p *Previewer) reviewOf(pr *pullRequest, name string) review.ReviewStack {
	for _, rs := range p.reviewsOf(pr) {
		if rs.Name == name {
			return rs
		}
	}
	return review.ReviewStack{Name: name}
}

// putReview sets rs in pr's view and wakes the expiry loop.
func (p *Previewer) putReview(pr *pullRequest, rs review.ReviewStack) {
	if rs.TTL > 0 || !rs.LastActivity.IsZero() {
		rs.ExpiresAt = review.ExpiresAt(review.Live{LastActivity: rs.LastActivity, TTL: rs.TTL})
	}
	p.setView(pr, func(v *review.PullRequest) {
		// A new slice: records and views being written share the old one.
		v.ReviewStacks = slices.Clone(v.ReviewStacks)
		i := slices.IndexFunc(v.ReviewStacks, func(x review.ReviewStack) bool { return x.Name == rs.Name })
		if i < 0 {
			v.ReviewStacks = append(v.ReviewStacks, rs)
		} else {
			v.ReviewStacks[i] = rs
		}
	})
	p.wakeReviews()
}

// wakeReviews tells the expiry loop that the review stacks changed.
func (p *Previewer) wakeReviews() {
	select {
	case p.reviewWake <- struct{}{}:
	default:
	}
}

// touchReviews counts an event of pr at now as activity for its review
// stacks; activity counted later already stays. p.mu is held.
func touchReviewsLocked(v *review.PullRequest, now time.Time) {
	v.ReviewStacks = slices.Clone(v.ReviewStacks) // see putReview
	for i := range v.ReviewStacks {
		rs := &v.ReviewStacks[i]
		if !now.After(rs.LastActivity) {
			continue
		}
		rs.LastActivity = now
		rs.ExpiresAt = review.ExpiresAt(review.Live{LastActivity: now, TTL: rs.TTL})
	}
}

// boundedLive are the live review stacks that the bounds count when pr
// plans: pr's own as its view has them, and in a cluster those of the
// other pull requests as their records tell.
func (p *Previewer) boundedLive(pr *pullRequest) []review.Live {
	if p.opts.Shared == nil {
		return p.liveReviews()
	}
	p.mu.Lock()
	key := pr.view.Key
	out := liveOf(key, pr.view.ReviewStacks)
	p.mu.Unlock()
	return append(out, p.sharedLive(key)...)
}

// takeStale says whether review stack name of pr was left running by a
// replica that died, and forgets it: the lock it left is broken once.
func (p *Previewer) takeStale(pr *pullRequest, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	stale := pr.stale[name]
	delete(pr.stale, name)
	return stale
}

// reviewLock takes the lock of review stack name and returns its unlock.
func (p *Previewer) reviewLock(name string) func() {
	p.mu.Lock()
	l := p.reviewLocks[name]
	if l == nil {
		l = &sync.Mutex{}
		p.reviewLocks[name] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}
