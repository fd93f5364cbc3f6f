package preview

import (
	"slices"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// post passes ev on to the replica that holds (or takes) its pull
// request's lease.
func (p *Previewer) post(ev review.Event, acc review.Accepted, note string) review.Accepted {
	acc.Ignored = note
	if err := p.opts.Shared.PostPullRequest(ev); err != nil {
		p.log.Error("cannot pass a pull request on to the cluster", "pullRequest", ev.Key(), "err", err)
		acc.Ignored = "cannot pass the pull request on to the cluster: " + err.Error()
	}
	return acc
}

// follow runs the work of the pull requests this replica holds the
// lease of, until Stop.
func (p *Previewer) follow() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case w := <-p.opts.Shared.PullRequestWork():
			p.work(w)
		}
	}
}

// work does one piece of work of a held pull request.
func (p *Previewer) work(w review.Work) {
	switch {
	case w.Lost:
		p.mu.Lock()
		if pr := p.prs[w.Key]; pr != nil {
			if pr.cancel != nil {
				pr.cancel(nil) // another replica takes it over: no status
			}
			if pr.lose != nil {
				pr.lose()
			}
			delete(p.prs, w.Key)
		}
		p.mu.Unlock()
		p.log.Warn("lost the lease of a pull request; another replica previews it", "pullRequest", w.Key)
	case w.Closed:
		p.mu.Lock()
		if pr := p.prs[w.Key]; pr != nil && pr.cancel != nil {
			pr.cancel(ended{"Pull request closed"})
		}
		delete(p.prs, w.Key)
		p.mu.Unlock()
	default:
		p.held(w)
	}
}

// held does the work of a pull request whose lease this replica holds:
// a closing destroys its review stacks, a sweep its expired ones, and a
// new head commit starts a round, superseding the round in progress.
// Taken over with its record, the pull request is what the record says,
// and the previews the last holder left running are marked aborted.
func (p *Previewer) held(w review.Work) {
	ev := w.Event
	f, _, ok := p.opts.Forges.For(ev.URLs)
	if !ok {
		p.log.Warn("no forge for a pull request of the cluster", "pullRequest", w.Key)
		p.opts.Shared.ReleasePullRequest(w.Key, ev.WorkKey())
		return
	}
	if w.Record != nil {
		p.abortLeft(w.Key, w.Record.View.Previews)
	}
	p.mu.Lock()
	pr := p.prs[w.Key]
	if w.Record != nil {
		pr = p.takenLocked(w.Key, *w.Record)
	}
	same := pr != nil && !pr.view.Closed && ev.Repeats(pr.ev)
	switch {
	case ev.Action == review.Closed:
		p.mu.Unlock()
		p.closed(ev)
	case same && !review.RoundDone(pr.ended, ev.HeadSHA) && roundRunning(pr):
		// A touch or a sweep while the round runs: the round's end
		// records ev's work as done.
		pr.ev = ev
		touchAt(&pr.view, ev.Touch)
		p.mu.Unlock()
		p.save(pr)
	case same && review.RoundDone(pr.ended, ev.HeadSHA):
		pr.ev = ev
		touchAt(&pr.view, ev.Touch)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.runDestroys(pr, ev, p.expiredSteps(pr, time.Now()), true)
		}()
	default:
		pr = p.supersedeLocked(ev, f, 0)
		p.mu.Unlock()
		p.save(pr)
	}
}

// roundRunning says whether the round of pr's head commit runs here.
// p.mu is held.
func roundRunning(pr *pullRequest) bool {
	if pr.done == nil {
		return false
	}
	select {
	case <-pr.done:
		return false
	default:
		return true
	}
}

// touchAt counts touch, an Event.Touch, as activity on the review stacks
// of v. p.mu is held.
func touchAt(v *review.PullRequest, touch int64) {
	if touch != 0 {
		touchReviewsLocked(v, time.UnixMilli(touch))
	}
}

// takenLocked makes the pull request of key what rec, its record as the
// lease was taken, says: the last holder wrote it. The review stacks rec
// shows running were left so by a holder that died. p.mu is held.
func (p *Previewer) takenLocked(key string, rec review.Record) *pullRequest {
	pr := p.prs[key]
	if pr == nil {
		pr = &pullRequest{}
		p.prs[key] = pr
	}
	pr.ev, pr.view, pr.comment, pr.ended = rec.Event, rec.View, rec.Comment, rec.Done
	pr.stale = map[string]bool{}
	for _, rs := range rec.View.ReviewStacks {
		if rs.Result == review.Running {
			pr.stale[rs.Name] = true
		}
	}
	return pr
}

// sweep asks the holders of the pull requests with review stacks expired
// at now to destroy them. Each asks with the latest expiry instant among
// them, which every replica reads alike from the records: the first ask
// counts, the others change nothing.
func (p *Previewer) sweep(now time.Time) {
	recs, err := p.opts.Shared.PullRequests()
	if err != nil {
		p.log.Warn("cannot read the review stacks of the cluster", "err", err)
		return
	}
	for _, rec := range recs {
		var at int64
		for _, l := range review.Expired(liveOf(rec.View.Key, rec.View.ReviewStacks), now) {
			at = max(at, review.ExpiresAt(l).Unix())
		}
		if at == 0 {
			continue
		}
		if err := p.opts.Shared.SweepPullRequest(rec.View.Key, at); err != nil {
			p.log.Warn("cannot ask for the destroy of expired review stacks", "pullRequest", rec.View.Key, "err", err)
		}
	}
}

// sharedLive are the live review stacks the records of the cluster tell,
// but those of pull request except.
func (p *Previewer) sharedLive(except string) []review.Live {
	recs, err := p.opts.Shared.PullRequests()
	if err != nil {
		p.log.Warn("cannot read the review stacks of the cluster", "err", err)
	}
	var out []review.Live
	for _, rec := range recs {
		if rec.View.Key != except {
			out = append(out, liveOf(rec.View.Key, rec.View.ReviewStacks)...)
		}
	}
	return out
}

// abortLeft marks aborted the previews a dead holder left running.
func (p *Previewer) abortLeft(key string, previews []review.Preview) {
	for _, pv := range previews {
		if pv.Update == "" || (pv.Result != review.Running && pv.Result != review.Queued) {
			continue
		}
		u, err := p.opts.Shared.Update(pv.Update)
		if err != nil || u.State != model.UpdateRunning {
			continue
		}
		u.State, u.EndTime = model.UpdateAborted, time.Now()
		u.Message = "the replica running the preview stopped; another one runs it again"
		if err := p.opts.Shared.PutPullRequestPreview(key, u); err != nil {
			p.log.Error("cannot mark a preview left running aborted", "update", u.ID, "err", err)
		}
	}
}

// sharedPullRequests lists the records of the cluster, newest first.
func (p *Previewer) sharedPullRequests() []review.PullRequest {
	recs, err := p.opts.Shared.PullRequests()
	if err != nil {
		p.log.Warn("cannot list the pull requests of the cluster", "err", err)
	}
	out := make([]review.PullRequest, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.View)
	}
	slices.SortFunc(out, func(a, b review.PullRequest) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	return out
}

// history is where the previews of pull request key are recorded: the
// store, or in a cluster behind the pull request's lease.
func (p *Previewer) history(key string) Store {
	if p.opts.Shared != nil {
		return leased{p.opts.Shared, key}
	}
	return p.opts.Store
}

// leased records previews behind the lease of pull request key.
type leased struct {
	s   Shared
	key string
}

func (l leased) BeginUpdate(u model.Update) (model.Update, error) {
	return l.s.BeginPullRequestPreview(l.key, u)
}
func (l leased) PutUpdate(u model.Update) error { return l.s.PutPullRequestPreview(l.key, u) }
func (l leased) PutLog(id string, log []byte) error {
	return l.s.PutPullRequestPreviewLog(l.key, id, log)
}
