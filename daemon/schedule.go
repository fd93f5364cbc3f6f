package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/activity"
	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/sched"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// sourceRetry is how soon a stack whose source or references could not be
// read is tried again, at most (PKO's sourceUnavailableRequeueWait).
const sourceRetry = 30 * time.Second

// evaluateStack starts a poll or an operation for st when one is due. It
// returns how long until time alone could change that (0: an event will).
func (d locked) evaluateStack(st *stackState, now time.Time, pass *passState) time.Duration {
	delete(d.starved, st.rec.Name)
	if !healthy(st) {
		pass.busy(st) // a lower wave must be Ready before a higher one starts
	}
	if !d.acts(st) {
		return 0 // another replica acts on it; its records keep st up to date
	}
	if st.rec.Orphaned != "" {
		return 0 // kept as it is until its removal is confirmed
	}
	if held, wait := d.handingOver(st, now); held {
		pass.busy(st)
		return wait
	}
	if st.act.Running() {
		pass.busy(st)
		return 0
	}
	// A stack being polled, or whose commit is not known yet, may be about
	// to run: later sync waves wait for it.
	if st.act.Polling() {
		pass.busy(st)
		return 0
	}
	if d.pollDue(st, now) {
		pass.busy(st)
		d.startPoll(st)
		return 0
	}
	// The stack waits again (Want, below) only while it wants to run and
	// cannot: a stack that no longer wants to run leaves the queue.
	d.move(st, activity.Settle)
	if wait := st.act.BlockedFor(now); wait > 0 {
		return wait
	}
	obs, ok := d.observe(st, now)
	if !ok {
		pass.busy(st)
		return d.untilPoll(st, now)
	}
	dec := decide.Decide(st.rec.Status.LastUpdate, obs)
	if held, wait := d.checkGate(st, obs, &dec); held {
		pass.busy(st)
		return sched.Sooner(wait, d.untilPoll(st, now))
	}
	switch {
	case dec.Finalize:
		d.finalize(st)
		return 0
	case !dec.Run:
		if st.rec.Status.ChangeWindow != nil { // what waited no longer wants to run
			st.rec.Status.ChangeWindow = nil
			d.putStack(st)
		}
		d.settle(st, dec, now)
		wait := sched.Sooner(dec.RecheckAfter, d.untilPoll(st, now))
		due, until := decide.DriftDue(st.stack, &st.rec.Status, d.opts.DriftInterval, d.opts.MinResync, now)
		if !due {
			return sched.Sooner(wait, until)
		}
		if d.running < d.opts.MaxConcurrent && !d.paused {
			d.startDrift(st, obs)
		}
		return wait
	}
	pass.busy(st)
	d.move(st, activity.Want)
	closed, wait, pathsOnly := d.windowClosed(st, dec, obs, now)
	if closed {
		return wait
	}
	if why := d.gate(st, now, pass); why != "" {
		d.waiting(st, model.ReasonPrerequisiteNotSatisfied, why, now)
		return 0
	}
	if now.Before(st.breakLockAt) {
		d.waiting(st, model.ReasonPrerequisiteNotSatisfied, "waiting for the handover grace before breaking the lock the stack's last holder left", now)
		return st.breakLockAt.Sub(now)
	}
	if d.running >= d.opts.MaxConcurrent || d.paused {
		if !d.paused {
			d.starved[st.rec.Name] = true // AcquireSlot lets it go first
		}
		return 0 // an operation's end, or Resume, kicks the loop
	}
	if reason, why := d.admit(st, dec.Type); reason != "" {
		d.waiting(st, reason, why, now) // a stack of its set's rollout ending wakes it
		return 0
	}
	d.startOperation(st, dec, obs, pathsOnly)
	if !st.act.Running() {
		d.rolloutDone(st) // it did not start: its step's slot goes back
	}
	return 0
}

// passState is what the evaluation of one stack says of its sync wave:
// busy when it is at work, wants to run, or is not Healthy. d.waves
// keeps it per stack, so that a stack of a higher wave of the same source
// waits (stacks are evaluated in wave order).
type passState struct{ marked bool }

func (p *passState) busy(*stackState) { p.marked = true }

// healthy says whether st is Healthy in Argo CD's sense: Ready at its
// current generation.
func healthy(st *stackState) bool {
	return conditions.HealthOf(&st.rec.Status, st.rec.Generation).Status == model.HealthHealthy
}

// tracksBranch says whether st's source must be polled.
func tracksBranch(st *stackState) bool {
	return st.stack != nil && st.stack.Spec.ProjectRepo != "" && st.stack.Spec.Branch != ""
}

// repoPollOf is the polling schedule of st's repository (due when new):
// every stack that tracks a branch of it polls in the same round, so that
// their resolves share one ls-remote (the Fetcher shares concurrent calls
// for one URL and credentials); see sched.Round.
func (d locked) repoPollOf(st *stackState) *sched.Round {
	key := spec.RepoKey(st.stack.Spec.ProjectRepo)
	r := d.repoPolls[key]
	if r == nil {
		r = &sched.Round{}
		d.repoPolls[key] = r
	}
	return r
}

// pollDue says whether st should poll now, starting its repository's
// next round when that is due.
func (d locked) pollDue(st *stackState, now time.Time) bool {
	if !tracksBranch(st) {
		return false
	}
	round := d.repoPollOf(st).Join(now, decide.ResyncPeriod(&st.stack.Spec, d.opts.MinResync), d.opts.pollEvery)
	return st.pollNow || st.round < round
}

func (d locked) untilPoll(st *stackState, now time.Time) time.Duration {
	if !tracksBranch(st) {
		return 0
	}
	return d.repoPollOf(st).Until(now)
}

// startPoll resolves st's branch in the background.
func (d locked) startPoll(st *stackState) {
	if !d.move(st, activity.Poll) {
		return
	}
	st.pollNow, st.round = false, d.repoPollOf(st).N()
	src, err := d.gitSource(st.stack)
	if err != nil {
		d.move(st, activity.Polled)
		d.block(st, model.ReasonSpecInvalid, err, time.Now())
		return
	}
	go d.Daemon.poll(st, st.stack, src)
}

// poll resolves src, the branch of st whose spec was stack when the poll
// began, and records the outcome.
func (d *Daemon) poll(st *stackState, stack *spec.Stack, src model.GitSource) {
	ctx, cancel := context.WithTimeout(d.loopCtx, d.opts.PollTimeout)
	start := time.Now()
	commit, err := d.opts.Fetcher.Resolve(ctx, src)
	cancel()
	d.opts.Observer.Polled(err, time.Since(start))
	l := d.lock()
	defer l.unlock()
	defer l.markDirty(st)
	l.move(st, activity.Polled)
	if st.stack != stack {
		return // the spec changed meanwhile: poll again
	}
	l.polled(st, commit, err)
}

// polled records a poll's outcome.
func (d locked) polled(st *stackState, commit string, err error) {
	if err != nil {
		if st.sourceErr == nil {
			d.log.Warn("cannot resolve the stack's branch", "stack", st.rec.Name, "err", err)
		}
		st.sourceErr = err
		d.block(st, model.ReasonSourceUnavailable, err, time.Now())
		return
	}
	if st.sourceErr != nil {
		d.log.Info("the stack's source is reachable again", "stack", st.rec.Name)
		st.sourceErr = nil
		st.act.Unblock()
	}
	if commit != st.commit && st.commit != "" {
		d.log.Info("new commit", "stack", st.rec.Name, "commit", commit)
		d.pollSiblings(st)
	}
	if commit != st.commit {
		st.commitSeen = time.Now()
	}
	st.commit = commit
}

// pollSiblings makes the stacks of st's config source that track
// the same branch of the same repository poll now, as Argo CD refreshes a whole application:
// a new commit then reaches every wave in one pass, and the lower waves
// run first, rather than each stack at its own poll.
func (d locked) pollSiblings(st *stackState) {
	repo := spec.RepoKey(st.stack.Spec.ProjectRepo)
	for _, other := range d.stacks {
		if other != st && tracksBranch(other) && other.stack.Source == st.stack.Source &&
			spec.RepoKey(other.stack.Spec.ProjectRepo) == repo && other.stack.Spec.Branch == st.stack.Spec.Branch {
			other.pollNow = true
			d.markDirty(other)
		}
	}
}

// observe gathers Decide's inputs. ok is false while the commit to
// deploy is not known yet.
func (d locked) observe(st *stackState, now time.Time) (decide.Observation, bool) {
	o := decide.Observation{
		Now:         now,
		Generation:  st.rec.Generation,
		MaxFailures: d.opts.MaxFailures,
		BackoffBase: d.opts.BackoffBase,
	}
	if st.stack == nil {
		o.Removed = true
		o.DestroyOnRemoval = st.rec.Destroy != nil || (st.gone != nil && st.gone.Spec.DestroyOnFinalize)
		o.Preview = st.rec.Destroy == nil && st.gone != nil && st.gone.Spec.Preview
		o.MaxBackoff = decide.DefaultMaxBackoff
		// Only an API sync can ask again: the annotation left with the
		// spec. A stalled destroy is retried that way.
		o.ReconcileRequest = d.request(st)
		return o, true
	}
	spec := &st.stack.Spec
	o.ReconcileRequest = d.request(st)
	o.Preview = spec.Preview
	o.ContinueResync = spec.ContinueResyncOnCommitMatch
	o.ResyncPeriod = decide.ResyncPeriod(spec, d.opts.MinResync)
	o.MaxBackoff = decide.MaxBackoff(spec)
	o.Commit = d.commitOf(st)
	if sc := st.rec.Status.SkippedCommit; sc != nil {
		o.SkippedCommit = sc.Commit
	}
	return o, o.Commit != ""
}

// request is the stack's reconcile request: the annotation and the last
// sync asked through the API, either of which changing asks for a run.
func (d locked) request(st *stackState) string {
	var parts []string
	if st.stack != nil && st.stack.ReconcileRequest() != "" {
		parts = append(parts, st.stack.ReconcileRequest())
	}
	if st.rec.SyncRequest != "" {
		parts = append(parts, st.rec.SyncRequest)
	}
	return strings.Join(parts, "; ")
}

// commitOf is what the stack would deploy now: the resolved branch, the
// pinned commit, or the Program's revision.
func (d locked) commitOf(st *stackState) string {
	spec := &st.stack.Spec
	switch {
	case spec.ProgramRef != nil:
		if p := d.cfg.Programs[spec.ProgramRef.Name]; p != nil {
			return p.Revision()
		}
		return ""
	case spec.Commit != "":
		return spec.Commit
	}
	return st.commit
}

// gate says why st may not start now: an unsatisfied prerequisite, a
// stack whose outputs it reads that has not deployed, or a lower sync
// wave still at work. Empty means it may start.
func (d locked) gate(st *stackState, now time.Time, pass *passState) string {
	if st.stack == nil {
		return "" // prerequisites are skipped while deleting, as PKO does
	}
	var unmet []string
	for _, p := range st.stack.Spec.Prerequisites {
		if why := d.prerequisite(p, now); why != "" {
			unmet = append(unmet, why)
		}
	}
	for _, name := range st.stack.Dependencies() {
		if dep := d.stacks[name]; dep == nil || !succeeded(dep) {
			if !hasPrerequisite(st.stack, name) {
				unmet = append(unmet, fmt.Sprintf("stack %q, whose outputs this stack reads, has not deployed", name))
			}
		}
	}
	if len(unmet) > 0 {
		return strings.Join(unmet, "; ")
	}
	if w, held := d.waves.Holding(st.stack.Source, st.stack.SyncWave); held {
		return fmt.Sprintf("waiting for sync wave %d to be Ready", w)
	}
	return ""
}

func hasPrerequisite(s *spec.Stack, name string) bool {
	for _, p := range s.Spec.Prerequisites {
		if p.Name == name {
			return true
		}
	}
	return false
}

// prerequisite applies PKO's isRequirementSatisfied to one prerequisite,
// asking a stale one to run again.
func (d locked) prerequisite(p spec.Prerequisite, now time.Time) string {
	dep := d.stacks[p.Name]
	if dep == nil || dep.stack == nil {
		return fmt.Sprintf("prerequisite %q is not in the config", p.Name)
	}
	last := dep.rec.Status.LastUpdate
	switch {
	case dep.act.Running() || busyElsewhere(dep) || last == nil || last.Generation != dep.rec.Generation || last.ReconcileRequest != d.request(dep):
		return fmt.Sprintf("prerequisite %q has not run to completion", p.Name)
	case last.State != model.UpdateSucceeded:
		return fmt.Sprintf("prerequisite %q failed", p.Name)
	}
	if r := p.Requirement; r != nil && r.SucceededWithinDuration != nil &&
		now.Sub(last.LastResyncTime) > r.SucceededWithinDuration.Duration {
		d.poke(dep, "after-"+last.Name)
		return fmt.Sprintf("prerequisite %q is out of date", p.Name)
	}
	return ""
}

// succeeded says whether st's last update succeeded.
func succeeded(st *stackState) bool {
	last := st.rec.Status.LastUpdate
	return last != nil && last.State == model.UpdateSucceeded && last.Type == model.UpdateUp
}

// poke asks st to run again, as PKO patches a stale prerequisite's
// reconcile-request annotation. It is idempotent for one token.
func (d locked) poke(st *stackState, token string) {
	if st.rec.SyncRequest == token {
		return
	}
	d.requestSync(st, token)
}

// waiting records that st wants to run but is gated, for reason.
func (d locked) waiting(st *stackState, reason, why string, now time.Time) {
	c := st.rec.Status.Condition(model.ConditionReconciling)
	if c != nil && c.Reason == reason && c.Message == why && st.rec.Status.ObservedGeneration == st.rec.Generation {
		return
	}
	conditions.MarkReconciling(&st.rec.Status, reason, why, st.rec.Generation, now)
	st.rec.Status.ObservedGeneration = st.rec.Generation // observed, as PKO writes on every reconcile
	d.putStack(st)
}

// block marks st Stalled for reason, as PKO does, and tries it again
// after sourceRetry (or on any change); its message says so, since a
// Stalled stack otherwise reads as one that waits for a person.
func (d locked) block(st *stackState, reason string, err error, now time.Time) {
	retry := min(sourceRetry, d.opts.MinResync)
	st.act.Block(now.Add(retry))
	msg := fmt.Sprintf("%v (tried again every %s)", err, retry) // Stalled, yet not for good
	c := st.rec.Status.Condition(model.ConditionStalled)
	if c != nil && c.Reason == reason && c.Message == msg && st.rec.Status.ObservedGeneration == st.rec.Generation {
		return
	}
	conditions.MarkStalled(&st.rec.Status, reason, msg, st.rec.Generation, now)
	st.rec.Status.ObservedGeneration = st.rec.Generation
	d.putStack(st)
}

// settle recomputes st's conditions when nothing is to run, as PKO does
// on every reconcile: once a block cleared, a stack whose last update
// succeeded at its generation is Ready again without an update.
func (d locked) settle(st *stackState, dec decide.Decision, now time.Time) {
	s, last := &st.rec.Status, st.rec.Status.LastUpdate
	if st.stack == nil || st.act.Blocked() || dec.Stalled || last == nil || last.State != model.UpdateSucceeded || last.Generation != st.rec.Generation {
		return
	}
	if c := s.Condition(model.ConditionReady); c == nil || c.Status != conditions.True {
		conditions.MarkReady(s, st.rec.Generation, now)
		d.putStack(st)
	}
}

// finalize forgets a removed stack whose removal is complete.
func (d locked) finalize(st *stackState) {
	name := st.rec.Name
	if err := d.opts.Store.DeleteStack(name); err != nil {
		d.storeError("cannot delete the record of a removed stack", name, err)
		return
	}
	d.resources.Forget(name)
	d.forget(name)
	d.declareStacks()
	d.removeStackDir(name)
	d.log.Info("stack removed", "stack", name)
}

// putStack persists st's record, logging a failure: the in-memory state
// stays authoritative and the next transition writes again.
func (d locked) putStack(st *stackState) {
	d.touch(st)
	st.rec.Status.Health = healthPtr(conditions.HealthOf(&st.rec.Status, st.rec.Generation))
	v := d.red.Version()
	st.rec.Status, _ = scrub.Status(st.rec.Status, d.red)
	st.scrubbed = v
	if !d.acts(st) {
		return // its holder writes it
	}
	if err := d.opts.Store.PutStack(st.rec); err != nil {
		d.storeError("cannot record the stack's status", st.rec.Name, err)
	}
}

// storeError logs a failed write about stack. A write refused because
// another replica now holds the stack is expected after a lost session:
// it says so without alarm.
func (d *Daemon) storeError(msg, stack string, err error, args ...any) {
	args = append([]any{"stack", stack, "err", err}, args...)
	if errors.Is(err, ErrNotOwner) {
		d.log.Info(msg+": another replica holds the stack now", args...)
		return
	}
	d.log.Error(msg, args...)
}

func healthPtr(h model.Health) *model.Health { return &h }
