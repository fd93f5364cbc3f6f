package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
)

// Change control: an up of a stack under approval, or of any stack while
// the daemon has policies, is previewed first with a saved plan. The
// policies judge the preview's steps; a denied change is held
// (PolicyDenied). A plan that needs approval is held (AwaitingApproval)
// until a person approves it, and the up then applies exactly that plan
// (`pulumi up --plan`). So the policies see every change that is applied.
//
// The destroy of a stack removed from the config (destroyOnFinalize) goes
// the same way when its last spec (or the daemon's default) asks for
// approval, or the daemon has policies: a destroy preview, the policies'
// verdict on its deletes, the approval decision, then the destroy. A
// destroy takes no plan file, so its plan binds the stack's state and
// config instead: the approved destroy runs only while they are those
// the preview saw.

// gated says whether j's operation goes through change control.
func (d *Daemon) gated(j job) bool {
	return gate.ChangeControlled(j.typ, j.stack == nil, d.opts.Policies != nil, j.approval)
}

// runGated runs j's up or destroy through change control: with an
// approved plan, the operation constrained to it; otherwise a preview
// that saves a plan, the policies' verdict and the approval decision,
// then the operation constrained to the plan unless the change is held,
// when it returns the Gate.
func (d *Daemon) runGated(ctx context.Context, j job, commit string, op model.Operation) (model.Result, *model.Gate, error) {
	if g := j.gate; g != nil {
		if g.Operation() == model.UpdateUp && commit != g.Commit {
			return model.Result{}, nil, fmt.Errorf("%w: the checkout is at %s, the plan was made at %s", ErrPlanStale, commit, g.Commit)
		}
		op.Plan = g.Plan
		res, err := d.opts.Runner.Run(ctx, op)
		return res, nil, err
	}
	pre, what := gate.PreviewOf(op)
	if op.Type == model.UpdateDestroy {
		fmt.Fprintf(op.Log, "previewing the destroy before running it; its plan binds the stack's state\n")
	} else {
		fmt.Fprintf(op.Log, "previewing the change with a saved plan before applying it\n")
	}
	pre.Judged = d.opts.Policies != nil
	res, err := d.opts.Runner.Run(ctx, pre)
	if err != nil {
		// The program's error, as the operation would have met it: the
		// log says that a preview ran first.
		return res, nil, err
	}
	if res.Plan == nil {
		return res, nil, fmt.Errorf("preview before the %s: the runner saved no plan", what)
	}
	g := &model.Gate{Type: op.Type, Commit: commit, Generation: j.obs.Generation, ReconcileRequest: j.obs.ReconcileRequest,
		Plan: res.Plan, Changes: gate.Changes(res.Steps), Steps: res.Steps}
	verdict := d.judge(ctx, j, commit, res)
	_, _ = io.WriteString(op.Log, gate.VerdictLog(verdict, res.Steps))
	if verdict.Denied() {
		d.discardPlan(j.st.rec.Name, res.Plan)
		g.State, g.Plan, g.Violations = model.GatePolicyDenied, nil, append(verdict.Deny, verdict.Warn...)
		g.Reason = gate.DenialMessage(verdict.Deny)
		return res, g, nil
	}
	if need, why := gate.NeedsApproval(j.approval, res.Steps); need {
		g.State, g.Reason, g.Violations = model.GateAwaiting, why, verdict.Warn
		g.Created = time.Now()
		g.Expires = g.Created.Add(j.approval.PlanMaxAge())
		return res, g, nil
	}
	fmt.Fprintf(op.Log, "applying %s\n", g.PlanName())
	op.Plan = res.Plan
	out, err := d.opts.Runner.Run(ctx, op)
	return out, nil, err
}

// judge evaluates the daemon's policies on res, a preview of j's
// operation (an up, or a removed stack's destroy), and tells the Observer
// the outcome. The policies judge the real values of secrets; the verdict
// returned is scrubbed of them and of every secret the daemon knows, as
// it is logged, stored and shown.
func (d *Daemon) judge(ctx context.Context, j job, commit string, res model.Result) model.PolicyVerdict {
	if d.opts.Policies == nil {
		return model.PolicyVerdict{}
	}
	in := model.PolicyInput{Stack: j.st.rec.Name, Operation: model.PolicyUp, Labels: j.labels, Commit: commit, Steps: res.JudgedSteps()}
	if j.typ == model.UpdateDestroy {
		in.Operation = model.PolicyDestroy
	}
	v := gate.JudgeSteps(ctx, d.opts.Policies, in).Scrubbed(d.red.With(res.PolicySecrets...).Clean)
	d.opts.Observer.PolicyEvaluated(in.Stack, v)
	return v
}

// hold records the preview's update u of a change that g holds, and the
// stack's status: the stack waits for approval, or stalls on a denial,
// until the change is superseded. Its last update stays as it was.
func (d *Daemon) hold(j job, u model.Update, res model.Result, g *model.Gate) {
	now := time.Now()
	g.Update = u.ID
	u.Type, u.EndTime, u.Changes, u.State = model.UpdatePreview, now, res.Changes, model.UpdateSucceeded
	if g.State == model.GatePolicyDenied {
		u.State, u.Message = model.UpdateFailed, g.Reason
	} else {
		u.Message = fmt.Sprintf("%s awaits approval: %s", g.PlanName(), g.Reason)
	}
	if err := d.opts.Store.PutUpdate(u); err != nil {
		d.storeError("cannot record the update's outcome", u.Stack, err, "update", u.ID)
	}
	if err := d.opts.Store.PutLog(u.ID, j.st.live.Bytes()); err != nil {
		d.storeError("cannot record the update's log", u.Stack, err, "update", u.ID)
	}
	l := d.lock()
	defer l.unlock()
	st := j.st
	l.release(st)
	s := &st.rec.Status
	g.Refused, st.refusedPlan = st.refusedPlan, ""
	s.CurrentUpdate, s.Gate = nil, g
	s.ObservedGeneration, s.ObservedReconcileRequest = j.obs.Generation, j.obs.ReconcileRequest
	event := notify.Event{Stack: st.rec.Name, Time: now, Update: u.ID, Commit: g.Commit, Message: u.Message}
	if g.State == model.GatePolicyDenied {
		conditions.MarkStalled(s, model.ReasonPolicyDenied, g.Reason, st.rec.Generation, now)
		event.Kind = notify.StackStalled
	} else {
		conditions.MarkAwaitingApproval(s, u.Message, st.rec.Generation, now)
		event.Kind = notify.ApprovalNeeded
	}
	l.putStack(st)
	l.opts.Notifier.Notify(event)
	l.opts.Observer.UpdateFinished(u)
	l.log.Info("change held", "stack", st.rec.Name, "state", g.State, "update", u.ID, "reason", g.Reason)
}

// planStale records an approved plan that the runner refused because it
// no longer holds. It counts no failure and leaves the last update as it
// was: the change still wants to run, so a new preview asks again at
// once; a person stands between each such preview and the next refusal.
func (d locked) planStale(st *stackState, u model.Update, now time.Time) {
	s := &st.rec.Status
	s.CurrentUpdate, st.refusedPlan = nil, u.Message
	conditions.MarkReconciling(s, model.ReasonPlanStale, "the approved plan was not applied; a new preview follows: "+u.Message, st.rec.Generation, now)
	d.opts.Notifier.Notify(notify.Event{Kind: notify.UpdateFailed, Stack: st.rec.Name, Time: now, Update: u.ID, Commit: u.Commit, Message: u.Message})
}

// checkGate applies gate.Action to st, held by a gate, once Decide decided
// dec. It returns whether st is held, and how long until time alone may
// change that; for an approved plan it rewrites dec's reason.
func (d locked) checkGate(st *stackState, obs decide.Observation, dec *decide.Decision) (bool, time.Duration) {
	g := st.rec.Status.Gate
	if g == nil {
		return false, 0
	}
	act, wait := gate.Action(g, obs, dec.Run && dec.Type == g.Operation())
	switch act {
	case gate.Drop:
		d.discardPlan(st.rec.Name, g.Plan)
		st.rec.Status.Gate = nil
		conditions.Remove(&st.rec.Status, model.ConditionAwaitingApproval)
		d.putStack(st)
		return false, 0
	case gate.Expire:
		d.discardPlan(st.rec.Name, g.Plan)
		g.State, g.Plan = model.GateExpired, nil
		msg := fmt.Sprintf("the plan expired unapproved after %s; a new commit or a sync request makes a new one", obs.Now.Sub(g.Created).Round(time.Second))
		if g.Operation() == model.UpdateDestroy {
			msg = fmt.Sprintf("the destroy plan expired unapproved after %s; a sync request makes a new one", obs.Now.Sub(g.Created).Round(time.Second))
		}
		conditions.MarkStalled(&st.rec.Status, model.ReasonPlanExpired, msg, st.rec.Generation, obs.Now)
		d.putStack(st)
		return true, 0
	case gate.Apply:
		dec.Reason = fmt.Sprintf("Approved by %s: %s", g.By, g.PlanName())
		return false, 0
	}
	return true, wait
}

// discardPlan deletes p, a plan of the stack name, when the runner saves
// plans; a failure is logged: a new preview supersedes it anyway.
func (d *Daemon) discardPlan(name string, p *model.Plan) {
	pd, ok := d.opts.Runner.(PlanDiscarder)
	if p == nil || !ok {
		return
	}
	if err := pd.DiscardPlan(name, p.ID); err != nil {
		d.log.Warn("cannot discard a plan", "stack", name, "plan", p.ID, "err", err)
	}
}

// Errors of Approve and Reject.
var (
	ErrNoPlan    = errors.New("no plan awaits approval")
	ErrPlanMoved = errors.New("that plan is not the one awaiting approval")
)

// Approve approves the plan of the named stack that awaits approval: plan
// names it by ID or digest, so that a stale page cannot approve a newer
// plan. The up constrained to it runs next; it records who approved.
func (d *Daemon) Approve(name, plan, who string) error {
	return d.decidePlan(name, plan, who, "", true)
}

// Reject rejects the plan of the named stack that awaits approval, and
// discards it: nothing is applied until a new commit or a sync request.
func (d *Daemon) Reject(name, plan, who, reason string) error {
	return d.decidePlan(name, plan, who, reason, false)
}

func (d *Daemon) decidePlan(name, plan, who, comment string, approve bool) error {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil {
		return ErrUnknownStack
	}
	if !l.acts(st) {
		return fmt.Errorf("stack %s: %w; decide on its plan through the replica that holds it", name, ErrNotOwner)
	}
	now := time.Now()
	g := st.rec.Status.Gate
	if g == nil || g.State != model.GateAwaiting || g.Plan == nil {
		return fmt.Errorf("stack %s: %w", name, ErrNoPlan)
	}
	if plan != g.Plan.ID && plan != g.Plan.Digest {
		return fmt.Errorf("stack %s: %w (plan %s)", name, ErrPlanMoved, g.Plan.ID)
	}
	if !now.Before(g.Expires) {
		return fmt.Errorf("stack %s: %w: plan %s expired", name, ErrNoPlan, g.Plan.ID)
	}
	g.By, g.Decided, g.Comment = who, now, comment
	note := fmt.Sprintf("approved by %s at %s", who, now.UTC().Format(time.RFC3339))
	if approve {
		g.State = model.GateApproved
		conditions.MarkReconciling(&st.rec.Status, model.ReasonStackProcessing, fmt.Sprintf("%s approved by %s", g.PlanName(), who), st.rec.Generation, now)
	} else {
		l.discardPlan(name, g.Plan)
		note = fmt.Sprintf("rejected by %s at %s", who, now.UTC().Format(time.RFC3339))
		if comment != "" {
			note += ": " + comment
		}
		again := "a new commit or a sync request makes a new plan"
		if g.Operation() == model.UpdateDestroy {
			again = "nothing is destroyed until a sync request makes a new plan; adding the stack back to the config keeps it"
		}
		conditions.MarkStalled(&st.rec.Status, model.ReasonPlanRejected, fmt.Sprintf("%s %s; %s", g.PlanName(), note, again), st.rec.Generation, now)
		g.State = model.GateRejected
	}
	l.noteOnUpdate(g.Update, note)
	l.putStack(st)
	l.markDirty(st)
	l.log.Info("plan decided", "stack", name, "plan", g.Plan.ID, "state", g.State, "by", who)
	return nil
}

// noteOnUpdate adds note to the message of the update id in the history.
func (d *Daemon) noteOnUpdate(id, note string) {
	u, err := d.opts.Store.Update(id)
	if err != nil {
		d.log.Warn("cannot read the plan's update", "update", id, "err", err)
		return
	}
	u.Message += "; " + note
	if err := d.opts.Store.PutUpdate(u); err != nil {
		d.storeError("cannot record the plan's decision", u.Stack, err, "update", id)
	}
}
