package preview

import (
	"context"
	"time"

	"github.com/stackd/stackd/daemon/review"
)

// stackd learns of a pull request's closing and of its pushes by webhook.
// A webhook that is lost (stackd down, the whole cluster down, a failed
// delivery) would leave a closed pull request listed, and its review
// stacks alive, until their TTL, and a missed push would leave the
// preview of an old head. The resync asks each recorded pull request's
// forge for its state, at Start and then every Options.ResyncInterval,
// and passes what it missed to PullRequest as the webhook would have: a
// closed event, or the event of the new head commit.
//
// It sends one request per open pull request per pass, one at a time,
// with the Previewer's context. In a cluster every replica runs it: the
// events go through the cluster like a webhook's, and an event the
// cluster has already is a no-op.

// startResync starts the resync, unless Options.ResyncInterval is zero.
func (p *Previewer) startResync() {
	if p.opts.ResyncInterval <= 0 {
		return
	}
	p.wg.Add(1)
	go p.resync()
}

// resync runs a pass at once and then every interval, until Stop.
func (p *Previewer) resync() {
	defer p.wg.Done()
	tick := time.NewTicker(p.opts.ResyncInterval)
	defer tick.Stop()
	for {
		p.resyncPass(p.ctx)
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// resyncPass checks each recorded pull request against its forge.
func (p *Previewer) resyncPass(ctx context.Context) {
	recs, err := p.resyncRecords()
	if err != nil {
		p.log.Warn("cannot read the open pull requests to check them on their forges", "err", p.clean(err.Error()))
		return
	}
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		p.resyncOne(ctx, rec)
	}
}

// resyncRecords are the records of the open pull requests: the store's
// (the cluster's), or without one those in memory.
func (p *Previewer) resyncRecords() ([]review.Record, error) {
	if p.opts.Records != nil {
		return p.opts.Records.PullRequests()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]review.Record, 0, len(p.prs))
	for _, pr := range p.prs {
		out = append(out, pr.record())
	}
	return out, nil
}

// resyncOne asks rec's forge for its pull request's state and passes on
// what rec missed. An error leaves rec alone: only the forge's word that
// the pull request is closed or gone (404) closes it.
func (p *Previewer) resyncOne(ctx context.Context, rec review.Record) {
	ev := rec.Event
	if ev.Action == review.Closed {
		return // its closing is in progress
	}
	f, _, ok := p.opts.Forges.For(ev.URLs)
	finder, can := f.(review.StateFinder)
	if !ok || !can {
		return
	}
	st, err := finder.PullRequestState(ctx, ev.Repo, ev.Number)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("cannot check a pull request's state on its forge", "pullRequest", ev.Key(), "err", p.clean(err.Error()))
		}
		return
	}
	next, ok := resyncEvent(rec, st)
	if !ok || p.moved(ev.Key(), ev.HeadSHA) {
		return
	}
	why := "Pull request closed"
	if next.Action == review.Closed {
		p.log.Info("a pull request closed while its webhook was missed", "pullRequest", ev.Key(), "merged", st.Merged, "gone", st.Gone)
	} else {
		why = "Superseded by " + next.HeadSHA
		p.log.Info("a push to a pull request was missed", "pullRequest", ev.Key(), "commit", short(next.HeadSHA), "was", short(ev.HeadSHA))
	}
	p.PullRequest(next)
	p.endLeft(f, rec, why)
}

// resyncEvent decides what catches rec up with st, its pull request's
// state on the forge: a closed event when it is closed, merged or gone;
// the event of its new head commit when it is open at another one;
// nothing (false) when rec is up to date, its closing is in progress
// already, or the forge named no head. The event is the record's, as a
// webhook's would be: a sweep the record's event asked for is no part of
// it.
func resyncEvent(rec review.Record, st review.PullRequestState) (review.Event, bool) {
	ev := rec.Event
	ev.Sweep = 0
	switch {
	case ev.Action == review.Closed:
		return review.Event{}, false
	case !st.Open || st.Gone:
		ev.Action = review.Closed
		return ev, true
	case st.HeadSHA == "" || st.HeadSHA == ev.HeadSHA:
		return review.Event{}, false
	}
	ev.Action, ev.HeadSHA = review.Pushed, st.HeadSHA
	return ev, true
}

// moved says whether pull request key is no longer at head as recorded:
// an event came (or it was dropped) while its forge was asked, and that
// event is newer than the forge's answer may be.
func (p *Previewer) moved(key, head string) bool {
	if p.opts.Shared == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		pr := p.prs[key]
		return pr == nil || pr.ev.HeadSHA != head || pr.ev.Action == review.Closed
	}
	recs, err := p.opts.Shared.PullRequests()
	if err != nil {
		return true // told at the next pass
	}
	for _, r := range recs {
		if r.View.Key == key {
			return r.Event.HeadSHA != head || r.Event.Action == review.Closed
		}
	}
	return true
}

// endLeft ends, with why, the statuses of rec's previews that were queued
// or running when its record was written, or that a stop cancelled
// (before they had a worker: TestE2EPullRequestResync caught it). A stop
// leaves them pending, and
// the round that Start runs again may be cancelled before it sets its
// own, whose end would have replaced them (endStatus); a commit never
// keeps a pending status.
func (p *Previewer) endLeft(f review.Forge, rec review.Record, why string) {
	if review.RoundDone(rec.Done, rec.Event.HeadSHA) {
		return // its round ended: its statuses are final
	}
	ctx, cancel := context.WithTimeout(p.ctx, endStatusTimeout)
	defer cancel()
	for _, pv := range rec.View.Previews {
		// Cancelled too: a stop cancels a round's previews and leaves
		// their statuses pending, for the round Start runs again.
		if pv.Result == review.Queued || pv.Result == review.Running || pv.Result == review.Cancelled {
			p.setStatus(ctx, f, rec.Event, review.Status{Context: "stackd/" + pv.Stack, State: review.Error, Description: why})
		}
	}
}
