// Package preview previews pull requests: for each pull request a forge
// announces, it runs `pulumi preview --diff` of every stack the pull
// request changes, at its head commit, in a work dir of its own and on a
// copy of the runner's state of the stack, and reports on the forge: a
// commit status per stack and one comment per pull request, edited on
// every push. It changes nothing of a stack but its history, where each
// preview is an update of type preview with the pull request's number.
package preview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// Daemon is what previews take from the reconcile loop (daemon.Daemon).
type Daemon interface {
	Config() *spec.Config
	ConfigInputs() ([]spec.Input, error)
	Resolve(ctx context.Context, cfg *spec.Config, s *spec.Stack) (model.GitSource, model.Workspace, []string, error)
	// StackBackend is the backend stack s of cfg names, resolved (see
	// spec.Config.StackBackend).
	StackBackend(cfg *spec.Config, s *spec.Stack) (string, error)
	AcquireSlot(ctx context.Context) (release func(), err error)
	// Redactor scrubs every secret the daemon knows.
	Redactor() *scrub.Redactor
}

// Store records previews in the stacks' histories.
type Store interface {
	BeginUpdate(u model.Update) (model.Update, error)
	PutUpdate(u model.Update) error
	PutLog(id string, log []byte) error
}

// Options configure a Previewer. Daemon, Runner, Fetcher, Store and
// DataDir are required.
type Options struct {
	// Node is this replica's name in a cluster, recorded on the
	// previews it runs; empty otherwise.
	Node    string
	Daemon  Daemon
	Runner  daemon.Runner
	Fetcher daemon.Fetcher
	Store   Store
	// Forges are the forges that report, by the host of their
	// repositories.
	Forges review.Forges
	// DataDir holds the previews' work dirs (previews/).
	DataDir string
	// UIURL is stackd's address as the forge's users reach it: commit
	// statuses and the comment link to the previews' pages under it.
	// Empty: no links.
	UIURL string
	// ForkPRs previews pull requests from forks, whose authors then run
	// code with the stacks' credentials.
	ForkPRs bool
	// Authors, when set, are the only authors whose pull requests are
	// previewed. An event that does not name the author (GitLab's,
	// triggered by another user) is held until the forge tells it
	// (review.AuthorFinder).
	Authors []string
	// SourceAuth is the credentials of the Git config sources.
	SourceAuth *model.GitAuth
	// Approval is the approval of stacks whose spec sets none
	// (--approval): a preview says which stacks will wait for approval.
	Approval *spec.Approval
	// Timeout bounds one preview; zero means the runner's default.
	Timeout  time.Duration
	Notifier daemon.Notifier
	Observer Observer
	// ReviewBounds bound the review stacks in all and per repository.
	ReviewBounds review.Bounds
	// Policies judge each preview's steps; nil: no policies.
	Policies gate.Policies
	// Records keeps the open pull requests: they are listed again, and
	// a round that a stop interrupted runs again, after Start. Nil keeps
	// them in memory only.
	Records review.Store
	// Shared, in a cluster, shares the pull requests among the replicas
	// (it is then Records too): see Shared.
	Shared Shared
	// ResyncInterval is how often the open pull requests are checked
	// against their forges, which catches up with the closings and pushes
	// whose webhooks were missed (see resync.go); the first check runs at
	// Start. Zero disables it.
	ResyncInterval time.Duration
	Logger         *slog.Logger
}

// Shared shares the previews of pull requests among the replicas of a
// cluster (package cluster implements it). Any replica posts the events
// it receives; the replica that holds a pull request's lease gets its
// work and does it (a round, a closing, a sweep), one at a time, and
// every write it makes about the pull request (its record, the previews
// in the stacks' histories) is fenced by that lease. When the holder
// dies, its lease expires and another replica takes the work over: it
// runs it again, editing the one comment whose ID the record keeps (or
// that the forge finds by its marker). Review stacks live in the
// records; every replica watches their expiry, and asks the holder to
// destroy the expired ones (SweepPullRequest).
type Shared interface {
	review.Store
	// PostPullRequest passes an event on, a closed pull request's too:
	// its holder destroys its review stacks, then deletes its event and
	// record (DeletePullRequest), and gets Work.Closed.
	PostPullRequest(ev review.Event) error
	// SweepPullRequest asks the holder of pull request key to destroy
	// its review stacks expired at at (Event.Sweep), unless a sweep of
	// at or later was asked already: every replica may ask at once.
	SweepPullRequest(key string, at int64) error
	// PullRequestWork delivers the work of the pull requests this
	// replica holds the lease of.
	PullRequestWork() <-chan review.Work
	// ReleasePullRequest gives the lease of a pull request up once the
	// work whose Event.WorkKey is work ended, unless a newer event was
	// handed over.
	ReleasePullRequest(key, work string)
	// BeginPullRequestPreview, PutPullRequestPreview and
	// PutPullRequestPreviewLog record a preview of pull request key in
	// its stack's history, behind its lease.
	BeginPullRequestPreview(key string, u model.Update) (model.Update, error)
	PutPullRequestPreview(key string, u model.Update) error
	PutPullRequestPreviewLog(key, id string, log []byte) error
	// Update reads a record of a stack's history.
	Update(id string) (model.Update, error)
}

// Observer hears about each finished preview and its policies' verdict,
// for metrics.
type Observer interface {
	review.Observer
	PolicyEvaluated(stack string, v model.PolicyVerdict)
	// ReviewStackDone hears about each finished operation on a review
	// stack.
	ReviewStackDone(op review.Op, result string)
}

// Previewer runs the previews of pull requests. It implements the web
// server's PreviewAPI.
type Previewer struct {
	opts Options
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu  sync.Mutex
	prs map[string]*pullRequest
	// reviewLocks order the operations on each review stack, by name;
	// reviewWake tells the expiry loop that a review stack changed.
	reviewLocks map[string]*sync.Mutex
	reviewWake  chan struct{}
	// saveMu orders the writes of records: each writes what the pull
	// request is when it takes the lock.
	saveMu sync.Mutex
}

// pullRequest is an open pull request and its newest round of previews,
// or a closed one whose review stacks are not all destroyed yet
// (view.Closed).
type pullRequest struct {
	ev      review.Event // the newest
	view    review.PullRequest
	cancel  context.CancelCauseFunc // of the round in progress
	done    chan struct{}           // closed when that round (or closing) ends
	comment int64                   // the comment's ID, once known
	// ended is the WorkKey of the work that ended; work that a stop
	// interrupted runs again at the next Start.
	ended string
	// stale names the review stacks whose operation a replica that died
	// left running: the next one breaks the lock it left.
	stale map[string]bool
	// life ends the destroys of pr's review stacks, when this replica
	// loses pr's lease (lose): another one runs them.
	life context.Context
	lose context.CancelFunc
}

// lifeOf is the context of the destroys of pr's review stacks.
func (p *Previewer) lifeOf(pr *pullRequest) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.life == nil {
		pr.life, pr.lose = context.WithCancel(p.ctx)
	}
	return pr.life
}

// record is what is kept of pr.
func (pr *pullRequest) record() review.Record {
	v := pr.view
	v.Previews, v.ReviewStacks = slices.Clone(v.Previews), slices.Clone(v.ReviewStacks)
	return review.Record{Event: pr.ev, View: v, Comment: pr.comment, Done: pr.ended}
}

// New makes a Previewer; Stop ends its work.
func New(opts Options) *Previewer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Shared != nil {
		opts.Records = opts.Shared
	}
	p := &Previewer{opts: opts, log: opts.Logger, prs: map[string]*pullRequest{},
		reviewLocks: map[string]*sync.Mutex{}, reviewWake: make(chan struct{}, 1)}
	p.ctx, p.stop = context.WithCancel(context.Background())
	return p
}

// Stop cancels the previews in progress and waits for them until ctx
// ends.
func (p *Previewer) Stop(ctx context.Context) error {
	p.stop()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PullRequest takes a verified pull-request event: a new head commit
// starts a round of previews (cancelling the round of the older one),
// and a closed pull request's round is cancelled and its review stacks
// destroyed. It never waits for the forge: the changed files are listed
// by the round.
func (p *Previewer) PullRequest(ev review.Event) review.Accepted {
	acc := review.Accepted{PullRequest: ev.Key(), Stacks: []string{}}
	if ev.Action == review.Closed {
		if p.opts.Shared != nil {
			return p.post(ev, acc, "pull request closed: its previews are cancelled")
		}
		p.closed(ev)
		acc.Ignored = "pull request closed: its previews are cancelled"
		return acc
	}
	f, _, ok := p.opts.Forges.For(ev.URLs)
	if why := p.refuse(ev, f, ok); why != "" {
		acc.Ignored = why
		p.log.Info("pull request not previewed", "pullRequest", ev.Key(), "why", why)
		return acc
	}
	if p.opts.Shared != nil {
		return p.post(ev, acc, "")
	}
	p.mu.Lock()
	pr := p.prs[ev.Key()]
	if pr != nil && pr.view.HeadSHA == ev.HeadSHA && !pr.view.Closed {
		touchReviewsLocked(&pr.view, time.Now()) // activity all the same
		p.mu.Unlock()
		p.save(pr)
		acc.Ignored = "head commit " + short(ev.HeadSHA) + " is previewed already"
		return acc
	}
	pr = p.supersedeLocked(ev, f, 0)
	p.mu.Unlock()
	p.save(pr)
	return acc
}

// supersedeLocked makes ev the newest event of its pull request and
// starts its round, cancelling the round of an older head commit.
// comment, when nonzero, is the ID of the pull request's comment as its
// record keeps it. p.mu is held.
func (p *Previewer) supersedeLocked(ev review.Event, f review.Forge, comment int64) *pullRequest {
	pr := p.prs[ev.Key()]
	if pr == nil {
		pr = &pullRequest{}
		p.prs[ev.Key()] = pr
	}
	if pr.comment == 0 {
		pr.comment = comment
	}
	if pr.cancel != nil {
		pr.cancel(ended{"Superseded by " + ev.HeadSHA})
	}
	reviews, refused := pr.view.ReviewStacks, pr.view.ReviewRefused
	pr.ev, pr.view = ev, viewOf(ev)
	pr.view.ReviewStacks, pr.view.ReviewRefused = reviews, refused
	touchReviewsLocked(&pr.view, time.Now())
	p.startLocked(pr, ev, f)
	return pr
}

// startLocked starts the round of ev's head commit, once the round before
// it ended. p.mu is held.
func (p *Previewer) startLocked(pr *pullRequest, ev review.Event, f review.Forge) {
	ctx, cancel := context.WithCancelCause(p.ctx)
	prev := pr.done
	pr.cancel, pr.done = cancel, make(chan struct{})
	p.wg.Add(1)
	go func(done chan struct{}) {
		defer p.wg.Done()
		defer close(done)
		defer cancel(nil)
		if prev != nil {
			<-prev // the older round's statuses and records are written
		}
		p.round(ctx, pr, ev, f)
		if ctx.Err() != nil {
			return
		}
		// The newest event may be ev's sweep: its work is done too.
		p.mu.Lock()
		last := pr.ev.HeadSHA == ev.HeadSHA && pr.ev.Action != review.Closed
		work := pr.ev.WorkKey()
		if last {
			pr.ended = work
		}
		p.mu.Unlock()
		p.save(pr)
		if last && p.opts.Shared != nil {
			p.opts.Shared.ReleasePullRequest(ev.Key(), work)
		}
	}(pr.done)
}

// Start lists the open pull requests of Records again, runs the rounds
// that a stop interrupted, and destroys the review stacks of the pull
// requests that closed. The daemon must be started: a round reads its
// config.
func (p *Previewer) Start() error {
	defer p.startResync() // once the records are loaded
	p.wg.Add(1)
	go p.expireReviews()
	if p.opts.Shared != nil {
		p.wg.Add(1)
		go p.follow()
		return nil
	}
	if p.opts.Records == nil {
		return nil
	}
	recs, err := p.opts.Records.PullRequests()
	if err != nil {
		return fmt.Errorf("preview: read the open pull requests: %w", err)
	}
	var closed []review.Event
	p.mu.Lock()
	for _, rec := range recs {
		pr := &pullRequest{ev: rec.Event, view: rec.View, comment: rec.Comment, ended: rec.Done}
		p.prs[rec.View.Key] = pr
		switch {
		case rec.Event.Action == review.Closed:
			closed = append(closed, rec.Event)
		case review.RoundDone(rec.Done, rec.Event.HeadSHA):
		default:
			if f, _, ok := p.opts.Forges.For(rec.Event.URLs); ok {
				p.log.Info("previewing a pull request again, as a stop interrupted it", "pullRequest", rec.View.Key, "commit", short(rec.Event.HeadSHA))
				p.startLocked(pr, rec.Event, f)
			}
		}
	}
	p.mu.Unlock()
	for _, ev := range closed {
		p.log.Info("destroying the review stacks of a closed pull request again", "pullRequest", ev.Key())
		p.closed(ev)
	}
	p.wakeReviews() // their review stacks expire as before the stop
	return nil
}

// save writes pr's record, unless it was forgotten meanwhile.
func (p *Previewer) save(pr *pullRequest) {
	if p.opts.Records == nil {
		return
	}
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.mu.Lock()
	rec, open := pr.record(), p.prs[pr.view.Key] == pr
	p.mu.Unlock()
	if !open {
		return
	}
	if err := p.opts.Records.PutPullRequest(rec); err != nil {
		p.log.Error("cannot record a pull request", "pullRequest", rec.View.Key, "err", err)
	}
}

// drop deletes the record of pull request key, unless it is open again.
func (p *Previewer) drop(key string) {
	if p.opts.Records == nil {
		return
	}
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.mu.Lock()
	_, open := p.prs[key]
	p.mu.Unlock()
	if open {
		return
	}
	if err := p.opts.Records.DeletePullRequest(key); err != nil {
		p.log.Error("cannot delete the record of a pull request", "pullRequest", key, "err", err)
	}
}

// refuse says why ev is not previewed, or "". An event that does not
// name its author passes when f can tell the author: the round asks
// (checkAuthor) before anything else.
func (p *Previewer) refuse(ev review.Event, f review.Forge, hasForge bool) string {
	_, canFind := f.(review.AuthorFinder)
	switch {
	case !hasForge:
		return "no forge is declared for the repository's host (--forge)"
	case ev.Fork && !p.opts.ForkPRs:
		return "the pull request comes from a fork; previews of forks need --preview-fork-prs"
	case ev.Author == "" && len(p.opts.Authors) > 0 && !canFind:
		return "the event does not name the pull request's author, which --preview-author needs"
	case ev.Author != "":
		return p.refuseAuthor(ev.Author)
	}
	return ""
}

// refuseAuthor says why a pull request of author is not previewed, or "".
func (p *Previewer) refuseAuthor(author string) string {
	if len(p.opts.Authors) > 0 && !slices.Contains(p.opts.Authors, author) {
		return "the pull request's author is not in --preview-author"
	}
	return ""
}

// checkAuthor asks the forge for the author of a pull request whose
// event did not name it, when --preview-author needs it, and says
// whether the round may go on. A refused pull request is forgotten, as
// refuse's are, unless a newer event of it took over; one whose author
// cannot be told shows the error, and nothing is written on the forge.
func (p *Previewer) checkAuthor(ctx context.Context, pr *pullRequest, ev *review.Event, f review.Forge) bool {
	if ev.Author != "" || len(p.opts.Authors) == 0 {
		return true
	}
	finder, ok := f.(review.AuthorFinder)
	if !ok {
		return false // refuse let no such event through
	}
	author, err := finder.PullRequestAuthor(ctx, ev.Repo, ev.Number)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("cannot tell a pull request's author", "pullRequest", ev.Key(), "err", err)
			p.setView(pr, func(v *review.PullRequest) { v.Error = "cannot tell the pull request's author: " + err.Error() })
		}
		return false
	}
	ev.Author = author
	p.setView(pr, func(v *review.PullRequest) { v.Author = author })
	if why := p.refuseAuthor(author); why != "" {
		p.log.Info("pull request not previewed", "pullRequest", ev.Key(), "why", why)
		p.forget(pr, ev.HeadSHA)
		return false
	}
	return true
}

// forget drops pr unless an event of a newer head commit took it over.
func (p *Previewer) forget(pr *pullRequest, head string) {
	p.mu.Lock()
	key := pr.view.Key
	gone := p.prs[key] == pr && pr.view.HeadSHA == head
	if gone {
		delete(p.prs, key)
	}
	p.mu.Unlock()
	if gone {
		p.drop(key)
	}
}

// closed cancels the round of a closed pull request and destroys its
// review stacks. A pull request without live review stacks is forgotten
// at once; one with some is kept, and listed, marked closed, until they
// are all destroyed (settle): its record outlives a stop, and in a
// cluster its holder's death, so that the destroys are run again.
func (p *Previewer) closed(ev review.Event) {
	key := ev.Key()
	p.mu.Lock()
	pr := p.prs[key]
	if pr != nil && pr.cancel != nil {
		pr.cancel(ended{"Pull request closed"})
		pr.cancel = nil
	}
	live := pr != nil && len(liveOf(key, pr.view.ReviewStacks)) > 0
	if pr != nil && !live {
		delete(p.prs, key)
	}
	if live {
		pr.ev, pr.view.Closed, pr.view.UpdatedAt = ev, true, time.Now()
	}
	p.mu.Unlock()
	if !live {
		p.drop(key) // in a cluster, its event too
		return
	}
	p.closeReviews(pr, ev)
}

// PullRequests lists the open pull requests, newest first: in a
// cluster, every replica's.
func (p *Previewer) PullRequests() []review.PullRequest {
	if p.opts.Shared != nil {
		return p.sharedPullRequests()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]review.PullRequest, 0, len(p.prs))
	for _, pr := range p.prs {
		v := pr.view
		v.Previews, v.ReviewStacks = slices.Clone(v.Previews), slices.Clone(v.ReviewStacks)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b review.PullRequest) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	return out
}

// setView changes pr's view under the lock, and records it.
func (p *Previewer) setView(pr *pullRequest, change func(v *review.PullRequest)) {
	p.mu.Lock()
	change(&pr.view)
	pr.view.Error = p.clean(pr.view.Error)
	pr.view.UpdatedAt = time.Now()
	p.mu.Unlock()
	p.save(pr)
}

func viewOf(ev review.Event) review.PullRequest {
	return review.PullRequest{Key: ev.Key(), Forge: ev.Forge, Repo: ev.Repo, Number: ev.Number, Title: ev.Title,
		Author: ev.Author, WebURL: ev.WebURL, BaseBranch: ev.BaseBranch, HeadSHA: ev.HeadSHA, Fork: ev.Fork,
		UpdatedAt: time.Now(), Previews: []review.Preview{}}
}

// notifyFailed tells the notifier of a failed preview.
func (p *Previewer) notifyFailed(ev review.Event, pv review.Preview) {
	if p.opts.Notifier == nil {
		return
	}
	p.opts.Notifier.Notify(notify.Event{Kind: notify.PreviewFailed, Stack: pv.Stack, Time: time.Now(),
		Message: p.clean(fmt.Sprintf("the preview of pull request #%d (%s) failed: %s", ev.Number, ev.Repo, review.FirstLine(pv.Error))),
		Update:  pv.Update, Commit: ev.HeadSHA})
}

// workDir is the directory of a pull request's work dirs.
func workDir(ev review.Event) string {
	sum := sha256.Sum256([]byte(ev.Key()))
	return hex.EncodeToString(sum[:8])
}

// ended is the cause of a round's end before its previews finished: a
// newer head commit, or the pull request closed. The statuses of the
// previews it leaves are set to review.Error with its text, so that the
// commit keeps no pending status; a round ended by stackd stopping sets
// none, as it runs again at the next start.
type ended struct{ why string }

func (e ended) Error() string { return e.why }

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
