package daemon

import (
	"fmt"
	"time"

	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"

	"github.com/stackd/stackd/daemon/notify"
)

// driftInterval is how often st is checked for drift; zero means never.
// Intervals are honoured down to the resync floor.
func (d locked) driftInterval(st *stackState) time.Duration {
	if st.stack == nil || st.stack.Spec.Preview {
		return 0
	}
	every := d.opts.DriftInterval
	if dd := st.stack.Spec.DriftDetection; dd != nil && dd.Interval.Duration > 0 {
		every = dd.Interval.Duration
	}
	if every <= 0 {
		return 0
	}
	return max(every, d.opts.MinResync)
}

// driftSchedule is st's cron schedule of drift checks, or nil.
func (d locked) driftSchedule(st *stackState) *spec.Cron {
	if st.stack == nil || st.stack.Spec.Preview || st.stack.Spec.DriftDetection == nil || st.stack.Spec.DriftDetection.Schedule == "" {
		return nil
	}
	sched, err := spec.ParseCron(st.stack.Spec.DriftDetection.Schedule) // validated when loaded
	if err != nil {
		return nil
	}
	return sched
}

// driftDue says whether st should be checked now, and if not, how long
// until it should (0: not until something changes). Only a stack whose
// last update succeeded is checked, against the commit it applied.
func (d locked) driftDue(st *stackState, now time.Time) (bool, time.Duration) {
	last := st.rec.Status.LastUpdate
	if last == nil || last.State != model.UpdateSucceeded || last.LastSuccessfulCommit == "" || last.Type != model.UpdateUp {
		return false, 0
	}
	var lastCheck time.Time
	if dr := st.rec.Status.Drift; dr != nil {
		lastCheck = dr.LastCheck
	}
	var due time.Time
	if sched := d.driftSchedule(st); sched != nil {
		if lastCheck.IsZero() {
			lastCheck = last.LastResyncTime
		}
		if due = sched.Next(lastCheck.UTC()); due.IsZero() {
			return false, 0
		}
	} else if every := d.driftInterval(st); every > 0 {
		due = lastCheck.Add(every)
	} else {
		return false, 0
	}
	if now.Before(due) {
		return false, due.Sub(now)
	}
	return true, 0
}

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
