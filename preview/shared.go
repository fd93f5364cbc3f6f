package preview

import (
	"slices"
	"time"

	"github.com/stackd/stackd/daemon"
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

// held starts the round of a pull request whose lease this replica
// holds, superseding its round in progress. Taken over with its record,
// the previews the last holder left running are marked aborted first.
func (p *Previewer) held(w review.Work) {
	ev := w.Event
	f, _, ok := p.opts.Forges.For(ev.URLs)
	if !ok {
		p.log.Warn("no forge for a pull request of the cluster", "pullRequest", w.Key)
		p.opts.Shared.ReleasePullRequest(w.Key, ev.HeadSHA)
		return
	}
	var comment int64
	if w.Record != nil {
		p.abortLeft(w.Key, w.Record.View.Previews)
		comment = w.Record.Comment
	}
	p.mu.Lock()
	pr := p.supersedeLocked(ev, f, comment)
	p.mu.Unlock()
	p.save(pr)
}

// abortLeft marks aborted the previews a dead holder left running.
func (p *Previewer) abortLeft(key string, previews []review.Preview) {
	for _, pv := range previews {
		if pv.Update == "" || (pv.Result != review.Running && pv.Result != review.Queued) {
			continue
		}
		u, err := p.opts.Shared.Update(pv.Update)
		if err != nil || u.State != daemon.UpdateRunning {
			continue
		}
		u.State, u.EndTime = daemon.UpdateAborted, time.Now()
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

func (l leased) BeginUpdate(u daemon.Update) (daemon.Update, error) {
	return l.s.BeginPullRequestPreview(l.key, u)
}
func (l leased) PutUpdate(u daemon.Update) error { return l.s.PutPullRequestPreview(l.key, u) }
func (l leased) PutLog(id string, log []byte) error {
	return l.s.PutPullRequestPreviewLog(l.key, id, log)
}
