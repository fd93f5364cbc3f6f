package daemon

import (
	"fmt"
	"time"

	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"

	"github.com/stackd/stackd/daemon/notify"
)

// startDrift runs a drift check of st.
func (d locked) startDrift(st *stackState, obs decide.Observation) {
	obs.Commit = st.rec.Status.LastUpdate.LastSuccessfulCommit
	d.startOperation(st, decide.Decision{Run: true, Type: model.UpdateDrift, Reason: "Drift check"}, obs, false)
}

// recordDrift turns a finished check into the stack's drift status, and
// asks for a remediation when the spec says so.
func (d locked) recordDrift(st *stackState, u model.Update, res model.Result, now time.Time) {
	prev := st.rec.Status.Drift
	dr := &spec.DriftStatus{State: spec.DriftInSync, LastCheck: now, Check: u.ID}
	if u.State != model.UpdateSucceeded {
		dr.State, dr.Message = spec.DriftCheckFailed, u.Message
		if prev != nil {
			dr.Since = prev.Since
		}
	} else {
		var rules []spec.DriftIgnore
		if st.stack != nil && st.stack.Spec.DriftDetection != nil {
			rules = st.stack.Spec.DriftDetection.Ignore
		}
		dr.Resources, dr.Ignored = spec.FilterDrift(res.Drift, rules)
		if len(dr.Resources) > 0 {
			dr.State, dr.Since = spec.DriftDrifted, now
			if prev != nil && prev.State == spec.DriftDrifted {
				dr.Since = prev.Since
			}
		}
	}
	st.rec.Status.Drift = dr
	d.opts.Observer.DriftChecked(dr.State)
	d.driftEvent(st.rec.Name, prev, dr, now)
	if dr.State == spec.DriftDrifted && st.stack != nil && st.stack.Spec.DriftDetection != nil && st.stack.Spec.DriftDetection.Remediate {
		st.remediate = "Drift remediation after check " + u.ID
		d.poke(st, "drift-"+u.ID)
	}
}

// driftHealed clears a drifted stack's drift once an up that refreshed
// first succeeded (u): the resources match the program again, so that the
// status and drift_resolved need not wait for the next check.
func (d locked) driftHealed(st *stackState, u model.Update, now time.Time) {
	prev := st.rec.Status.Drift
	if prev == nil || prev.State != spec.DriftDrifted {
		return
	}
	dr := &spec.DriftStatus{State: spec.DriftInSync, LastCheck: now, Check: u.ID,
		Message: "put back by update " + u.ID + ", which refreshed first"}
	st.rec.Status.Drift = dr
	d.driftEvent(st.rec.Name, prev, dr, now)
}

// driftEvent tells the notifier when a stack starts or stops drifting.
func (d *Daemon) driftEvent(stack string, prev, cur *spec.DriftStatus, now time.Time) {
	was := prev != nil && prev.State == spec.DriftDrifted
	switch {
	case cur.State == spec.DriftDrifted && !was:
		d.opts.Notifier.Notify(notify.Event{Kind: notify.DriftDetected, Stack: stack, Time: now, Update: cur.Check, Drift: cur,
			Message: fmt.Sprintf("%d resource(s) of stack %s changed outside Pulumi", len(cur.Resources), stack)})
	case cur.State == spec.DriftInSync && was:
		d.opts.Notifier.Notify(notify.Event{Kind: notify.DriftResolved, Stack: stack, Time: now, Update: cur.Check, Drift: cur,
			Message: fmt.Sprintf("stack %s matches its state again", stack)})
	}
}
