package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stackd/stackd/daemon/activity"
	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/spec"

	"github.com/stackd/stackd/daemon/notify"
)

// job is one operation's inputs, captured under the lock when it starts.
type job struct {
	st      *stackState
	stack   *spec.Stack // nil for a removed stack
	cfg     *spec.Config
	typ     string
	reason  string
	obs     decide.Observation
	destroy *model.DestroySpec
	// remediate repairs drift: the up refreshes first.
	remediate bool
	// refreshed is set once the operation is built when it refreshes
	// first.
	refreshed bool
	// breakLock breaks a Pulumi lock that a dead holder left.
	breakLock bool
	// newCommit: only a new commit asks for the run (Decision.NewCommit).
	newCommit bool
	// pathsHash digests the checkout's files of spec.paths.
	pathsHash string
	// pathsOnly: closed change windows let the job go only as far as
	// skipCommit; a commit that changes the stack's files waits.
	pathsOnly bool
	// override is the change windows' override the update runs under;
	// manual says it runs for a sync a person asked for.
	override *model.WindowOverride
	manual   bool
	// gate is the approved plan the up or the destroy is constrained to
	// (nil: none); stalePlan says the runner refused it: it no longer
	// holds.
	gate      *model.Gate
	stalePlan bool
	// approval and labels are the stack's, for change control: a removed
	// stack's come from its last spec or its record (gate.ApprovalOf).
	approval *spec.Approval
	labels   map[string]string
}

// startOperation marks st running and runs its operation in the
// background; with pathsOnly, only as far as the check of spec.paths.
func (d locked) startOperation(st *stackState, dec decide.Decision, obs decide.Observation, pathsOnly bool) {
	if !d.move(st, activity.Start) {
		return
	}
	d.running++
	ctx, cancel := context.WithCancel(d.opCtx)
	st.cancel = cancel
	st.live = livelog.New()
	j := job{st: st, stack: st.stack, cfg: d.cfg, typ: dec.Type, reason: dec.Reason, obs: obs, destroy: st.rec.Destroy, newCommit: dec.NewCommit, pathsOnly: pathsOnly,
		approval: gate.ApprovalOf(st.stack, st.gone, st.rec.Destroy, d.opts.Approval), labels: gate.LabelsOf(st.stack, st.gone, st.rec.Destroy)}
	if !st.breakLockAt.IsZero() {
		j.breakLock, st.breakLockAt = true, time.Time{}
	}
	if dec.Type != model.UpdateDrift {
		j.override, j.manual, st.rec.ManualSync = st.rec.WindowOverride, st.rec.ManualSync, false
	}
	if g := st.rec.Status.Gate; g != nil && g.State == model.GateApproved && dec.Type == g.Operation() {
		j.gate = g.Clone()
	}
	if st.remediate != "" && dec.Type == model.UpdateUp {
		j.reason, j.remediate = st.remediate, true
		st.remediate = ""
	}
	d.log.Info("operation starting", "stack", st.rec.Name, "type", dec.Type, "reason", dec.Reason)
	d.workWG.Add(1)
	go d.Daemon.operate(ctx, cancel, j)
}

// operate prepares the workspace, records the update, runs it and
// records the outcome; then it cancels ctx and tells Stop it is done.
func (d *Daemon) operate(ctx context.Context, cancel context.CancelFunc, j job) {
	defer d.workWG.Done()
	defer cancel()
	p, err := d.prepare(ctx, j)
	if err != nil {
		d.notPrepared(j, err)
		return
	}
	if j.pathsHash = p.pathsHash; d.skipCommit(j) || d.heldByWindow(j) {
		return
	}
	u, err := d.begin(j, p)
	if err != nil {
		d.notPrepared(j, &prepareError{model.ReasonWorkspaceFailed, err})
		return
	}
	d.red.Add(p.secrets...)
	sw := d.red.Writer(j.st.live)
	op := d.operation(j, p)
	op.Log = sw
	j.refreshed = op.Refresh
	var res model.Result
	var runErr error
	if d.gated(j) {
		var held *model.Gate
		if res, held, runErr = d.runGated(ctx, j, p.commit, op); held != nil {
			sw.Close()
			d.hold(j, u, res, held)
			return
		}
	} else {
		res, runErr = d.opts.Runner.Run(ctx, op)
	}
	if j.typ == model.UpdateDestroy && errors.Is(runErr, ErrStackNotFound) {
		_, _ = io.WriteString(sw, "nothing to destroy: "+runErr.Error()+"\n")
		runErr = nil
	}
	j.stalePlan = j.gate != nil && errors.Is(runErr, ErrPlanStale)
	if runErr != nil {
		runErr = errors.New(sw.Clean(runErr.Error()))
		// The log always holds the error, also of a program that failed
		// before it printed anything.
		_, _ = io.WriteString(sw, "\nerror: "+runErr.Error()+"\n")
	}
	sw.Close()
	for k, v := range res.Outputs {
		res.Outputs[k] = d.red.JSON(v)
	}
	d.finish(ctx, j, u, res, runErr)
}

// prepareError is a failure before an update could start, with the
// Stalled reason it shows as.
type prepareError struct {
	reason string
	err    error
}

func (e *prepareError) Error() string { return e.err.Error() }
func (e *prepareError) Unwrap() error { return e.err }

// notPrepared records a failure to prepare: the stack is Stalled with the
// reason until it is tried again; no update is recorded and no failure
// counted, as in PKO.
func (d *Daemon) notPrepared(j job, err error) {
	reason := model.ReasonWorkspaceFailed
	var pe *prepareError
	if errors.As(err, &pe) {
		reason = pe.reason
	}
	d.log.Warn("cannot prepare the stack's workspace", "stack", j.st.rec.Name, "reason", reason, "err", err)
	l := d.lock()
	defer l.unlock()
	l.release(j.st)
	l.block(j.st, reason, err, time.Now())
}

// release ends st's running state; an operation that outlived the loss
// of its stack acknowledges that loss.
func (d locked) release(st *stackState) {
	d.move(st, activity.End)
	st.cancel = nil
	st.live.Close()
	d.running--
	d.rolloutDone(st)
	if d.clustered && !st.held && !st.releasing {
		d.own.Release(st.rec.Name)
	}
	d.markDirty(st)
	d.wakeWaiting()
}

// wakeWaiting marks dirty the stacks that wait for a worker, a
// prerequisite or a sync wave: a stack's change may let them start.
func (d locked) wakeWaiting() {
	for name := range d.waiters {
		d.queue.MarkDirty(name)
	}
	d.kick()
}

// skipCommit ends a job for a new commit that changes no file of
// spec.paths (same digest as at the last successful up): nothing runs,
// the stack notes the commit as seen and stays Ready.
func (d *Daemon) skipCommit(j job) bool {
	l := d.lock()
	defer l.unlock()
	st := j.st
	if !j.newCommit || j.pathsHash == "" || j.pathsHash != st.rec.PathsHash {
		return false
	}
	globs, _ := j.stack.Spec.PathFilter()
	reason := fmt.Sprintf("changes no file of paths %v", globs)
	st.rec.Status.SkippedCommit = &model.SkippedCommit{Commit: j.obs.Commit, Reason: reason, Time: time.Now()}
	l.release(st)
	l.putStack(st)
	l.log.Info("new commit skipped", "stack", st.rec.Name, "commit", j.obs.Commit, "reason", reason)
	return true
}

// heldByWindow ends a pathsOnly job whose commit changes the stack's
// files: st notes it, and its next evaluation holds it back until the
// windows open.
func (d *Daemon) heldByWindow(j job) bool {
	if !j.pathsOnly {
		return false
	}
	l := d.lock()
	defer l.unlock()
	j.st.changesPaths = j.obs.Commit
	l.release(j.st)
	l.log.Info("the new commit changes files of the stack's paths: it waits for the change windows", "stack", j.st.rec.Name, "commit", j.obs.Commit)
	return true
}

// begin records the update as running.
func (d *Daemon) begin(j job, p *prepared) (model.Update, error) {
	now := time.Now()
	u, err := d.opts.Store.BeginUpdate(model.Update{
		Stack:            j.st.rec.Name,
		Type:             j.typ,
		Reason:           j.reason,
		Generation:       j.obs.Generation,
		ReconcileRequest: j.obs.ReconcileRequest,
		Commit:           p.commit,
		CommitInfo:       p.commitInfo,
		StartTime:        now,
		State:            model.UpdateRunning,
		Node:             d.opts.Node,
		WindowOverride:   j.override,
		ManualSync:       j.manual,
	})
	if err != nil {
		return model.Update{}, fmt.Errorf("record the update: %w", err)
	}
	l := d.lock()
	defer l.unlock()
	st := j.st
	st.act.Unblock()
	if j.override != nil && st.rec.WindowOverride == j.override {
		st.rec.WindowOverride = nil // used
	}
	if p.destroy != nil {
		st.rec.Destroy = p.destroy
	} else if j.stack != nil {
		st.rec.Destroy = nil
	}
	st.rec.Status.CurrentUpdate = &model.CurrentUpdate{Generation: u.Generation, ReconcileRequest: u.ReconcileRequest, Name: u.ID, Commit: u.Commit}
	if j.typ != model.UpdateDrift { // drift is an axis of its own
		st.rec.Status.Retry = nil
		conditions.MarkReconciling(&st.rec.Status, model.ReasonStackProcessing, "stack is being processed: "+j.reason, st.rec.Generation, now)
	}
	l.putStack(st)
	return u, nil
}

// operation builds the runner's operation for a prepared job.
func (d *Daemon) operation(j job, p *prepared) model.Operation {
	op := model.Operation{Workspace: p.ws, Type: j.typ, Timeout: d.opts.OpTimeout, BreakLock: j.breakLock, Export: exportsState(j.typ)}
	if ds := j.destroy; j.stack == nil {
		op.Remove = ds != nil && ds.Remove
		if ds != nil {
			op.Identity = resolve.Identity(ds.Credentials, ds.Labels, ds.Repository, p.commit, j.gate)
		}
		return op
	}
	resolve.Options(&op, &j.stack.Spec, j.remediate)
	op.Identity = resolve.Identity(j.stack.Spec.Credentials, j.labels, j.stack.Spec.ProjectRepo, p.commit, j.gate)
	return op
}

// finish records an operation's outcome in the update, its log and the
// stack's status, by PKO's rules.
func (d *Daemon) finish(ctx context.Context, j job, u model.Update, res model.Result, runErr error) {
	now := time.Now()
	u.EndTime, u.Changes, u.Permalink = now, res.Changes, res.Permalink
	u.State = model.UpdateSucceeded
	if runErr != nil {
		u.State, u.Message = model.UpdateFailed, runErr.Error()
		if ctx.Err() != nil {
			u.State, u.Message = model.UpdateAborted, "interrupted: stackd was stopping"
		}
	}
	l := d.lock()
	acts := l.acts(j.st)
	l.unlock()
	if !acts {
		d.log.Info("not recording the outcome of the update: another replica holds the stack now", "stack", u.Stack, "update", u.ID)
	} else {
		if err := d.opts.Store.PutUpdate(u); err != nil {
			d.storeError("cannot record the update's outcome", u.Stack, err, "update", u.ID)
		}
		if err := d.opts.Store.PutLog(u.ID, j.st.live.Bytes()); err != nil {
			d.storeError("cannot record the update's log", u.Stack, err, "update", u.ID)
		}
		if res.Exported {
			d.recordResources(u, res.Resources)
		}
		if res.ExportFailed {
			d.log.Warn("the stack's resources show the state before this update: exporting them failed", "stack", u.Stack, "update", u.ID)
			d.opts.Observer.ResourcesExportFailed(u.Stack)
		}
	}
	l = d.lock()
	defer l.unlock()
	st := j.st
	l.release(st)
	if j.gate != nil {
		st.rec.Status.Gate = nil // applied, or it failed: a new preview asks again
	}
	if j.stalePlan && u.State == model.UpdateFailed {
		l.planStale(st, u, now)
	} else {
		l.recordOutcome(st, j, u, res, now)
	}
	l.putStack(st)
	l.opts.Observer.UpdateFinished(u)
	if u.State == model.UpdateFailed {
		l.log.Warn("operation failed", "stack", st.rec.Name, "type", u.Type, "update", u.ID, "commit", u.Commit, "err", u.Message)
	} else {
		l.log.Info("operation finished", "stack", st.rec.Name, "type", u.Type, "state", u.State, "update", u.ID)
	}
}

// recordOutcome updates st's status for a finished update u.
func (d locked) recordOutcome(st *stackState, j job, u model.Update, res model.Result, now time.Time) {
	s := &st.rec.Status
	if u.Type == model.UpdateDrift {
		s.CurrentUpdate = nil
		d.recordDrift(st, u, res, now)
		return
	}
	if u.State == model.UpdateAborted { // a stop or a handover: no failure, it runs again
		s.CurrentUpdate = nil
		return
	}
	if u.CommitInfo != nil {
		st.rec.LatestCommit = u.CommitInfo
		if u.State == model.UpdateSucceeded && u.Type == model.UpdateUp {
			st.rec.AppliedCommit = u.CommitInfo
		}
	}
	last := s.LastUpdate
	lu := &model.LastUpdate{
		Generation: j.obs.Generation, ReconcileRequest: j.obs.ReconcileRequest,
		Name: u.ID, Type: u.Type, State: model.UpdateSucceeded, Message: u.Message,
		LastAttemptedCommit: u.Commit, Permalink: u.Permalink, LastResyncTime: now,
	}
	s.CurrentUpdate = nil
	s.ObservedGeneration, s.ObservedReconcileRequest = j.obs.Generation, j.obs.ReconcileRequest
	if u.State == model.UpdateSucceeded {
		st.rec.LastSuccess = now
		if u.Type == model.UpdateUp && (last == nil || last.LastSuccessfulCommit != u.Commit) &&
			u.Commit == st.commit && !st.commitSeen.IsZero() {
			d.opts.Observer.CommitApplied(now.Sub(st.commitSeen))
		}
		lu.LastSuccessfulCommit = u.Commit
		switch u.Type {
		case model.UpdateUp:
			s.Outputs = res.Outputs
			st.rec.PathsHash, s.SkippedCommit = j.pathsHash, nil
			if j.refreshed {
				d.driftHealed(st, u, now)
			}
		case model.UpdateDestroy:
			s.Outputs = nil
		}
		s.LastUpdate, s.Retry = lu, nil
		wasStalled := s.Condition(model.ConditionStalled) != nil
		conditions.MarkReady(s, st.rec.Generation, now)
		if wasStalled || (last != nil && last.State == model.UpdateFailed) {
			d.opts.Notifier.Notify(notify.Event{Kind: notify.StackRecovered, Stack: st.rec.Name, Time: now, Update: u.ID, Commit: u.Commit,
				Message: fmt.Sprintf("stack %s: %s succeeded after failing", st.rec.Name, u.Type)})
		}
		return
	}
	lu.State = model.UpdateFailed
	if last != nil {
		lu.LastSuccessfulCommit = last.LastSuccessfulCommit
	}
	lu.Failures = decide.NextFailures(last, j.obs.Generation, j.obs.ReconcileRequest, u.Commit)
	s.LastUpdate = lu
	s.Retry = nil
	event := notify.Event{Kind: notify.UpdateFailed, Stack: st.rec.Name, Time: now, Update: u.ID, Commit: u.Commit, Message: u.Message}
	if lu.Failures >= d.opts.MaxFailures {
		conditions.MarkStalled(s, model.ReasonUpdateFailed, conditions.FailureMessage(u.Type, lu.Failures)+": "+u.Message, st.rec.Generation, now)
		event.Kind, event.Message = notify.StackStalled, s.Condition(model.ConditionStalled).Message
		d.opts.Notifier.Notify(event)
		d.log.Error("stack stalled: not retrying until its spec, its commit or a sync request changes",
			"stack", st.rec.Name, "commit", u.Commit, "failures", lu.Failures, "err", u.Message)
		return
	}
	d.opts.Notifier.Notify(event)
	s.Retry = &model.Retry{Attempt: lu.Failures + 1, Of: j.obs.FailureLimit(),
		At: now.Add(decide.BackoffFrom(j.obs.BackoffBase, lu.Failures-1, j.obs.MaxBackoff))}
	// PKO's wording first, which Argo CD users read; then the error.
	reason, msg := model.ReasonRetryingAfterFailure, fmt.Sprintf("%d update failure(s)", lu.Failures)
	if u.Type == model.UpdatePreview {
		reason, msg = model.ReasonPreviewFailed, fmt.Sprintf("preview failed (%d attempt(s))", lu.Failures)
	}
	conditions.MarkReconciling(s, reason, msg+": "+u.Message, st.rec.Generation, now)
}
