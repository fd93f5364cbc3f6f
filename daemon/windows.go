package daemon

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/daemon/window"
)

// MaxOverrideReason bounds an override's reason, in bytes.
const MaxOverrideReason = 1000

// ErrNoReason is returned for an override without a reason.
var ErrNoReason = errors.New("an override needs a reason")

// windowClosed says whether the change windows hold back st's decided
// run now, and records it in st's status; when they do, it returns how
// long until the windows open. An override lets the run go; pathsOnly
// lets it go only as far as the check of spec.paths (decide.WindowChecksPaths).
func (d locked) windowClosed(st *stackState, dec decide.Decision, obs decide.Observation, now time.Time) (closed bool, wait time.Duration, pathsOnly bool) {
	change := decide.ChangeOf(st.rec.Status.LastUpdate, obs, dec, st.remediate != "")
	v := window.Verdict{Open: true}
	if change != "" && st.rec.WindowOverride == nil {
		v = window.Check(d.cfg.ChangeWindows, windowStack(st), change, now)
	}
	switch decide.WindowRule(change, v.Lets(st.rec.ManualSync), st.rec.WindowOverride != nil, d.unchecked(st, dec, obs)) {
	case decide.WindowChecksPaths:
		return false, 0, true
	case decide.WindowLets:
		if st.rec.Status.ChangeWindow != nil {
			st.rec.Status.ChangeWindow = nil
			d.putStack(st)
		}
		return false, 0, false
	}
	ws, msg := waits(change, v)
	c := st.rec.Status.Condition(model.ConditionReconciling)
	if c == nil || c.Reason != model.ReasonChangeWindowClosed || c.Message != msg || st.rec.Status.ObservedGeneration != st.rec.Generation {
		st.rec.Status.ChangeWindow = ws
		conditions.MarkReconciling(&st.rec.Status, model.ReasonChangeWindowClosed, msg, st.rec.Generation, now)
		st.rec.Status.ObservedGeneration = st.rec.Generation
		d.putStack(st)
	}
	if v.NextOpen.IsZero() {
		return true, 0, false // a new config or an override changes it
	}
	return true, max(v.NextOpen.Sub(now), time.Second), false
}

// waits is how a change that v closes waits, and the message that says
// until when.
func waits(change string, v window.Verdict) (*model.ChangeWindowStatus, string) {
	return &model.ChangeWindowStatus{Change: change, NextOpen: v.NextOpen, Windows: v.Names()}, window.Message(change, v)
}

// SyncWindow says whether the change windows hold back a sync a person
// asks of the named stack now: how it waits and the message that says
// until when, or nil when they let it run (manualSync) or an override waits.
// It changes nothing; any replica answers from its config.
func (d *Daemon) SyncWindow(name string) (*model.ChangeWindowStatus, string) {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil || st.rec.WindowOverride != nil {
		return nil, ""
	}
	now := time.Now().UTC()
	obs, _ := l.observe(st, now)
	dr := st.rec.Status.Drift // a sync of a drifted stack remediates
	remediating := st.remediate != "" || dr != nil && dr.State == spec.DriftDrifted
	change := decide.ChangeOf(st.rec.Status.LastUpdate, obs, decide.Decision{Run: true, Type: obs.RunType()}, remediating)
	if v := window.Check(l.cfg.ChangeWindows, windowStack(st), change, now); change != "" && !v.Lets(true) {
		return waits(change, v)
	}
	return nil, ""
}

// unchecked says whether dec's run is for a new commit that st would
// skip if it changed none of the files of its paths, and that is not
// known yet to change them (st.changesPaths).
func (d locked) unchecked(st *stackState, dec decide.Decision, obs decide.Observation) bool {
	if !dec.NewCommit || st.stack == nil || st.rec.PathsHash == "" || st.changesPaths == obs.Commit {
		return false
	}
	_, all := st.stack.Spec.PathFilter()
	return !all
}

// windowStack is what the windows' selectors see of st: its name, and
// the labels it has or, once removed, had (kept in its record across
// restarts).
func windowStack(st *stackState) window.Stack {
	return window.Stack{Name: st.rec.Name, Labels: gate.LabelsOf(st.stack, st.gone, st.rec.Destroy)}
}

// OverrideWindow asks for a run of the named stack that the change
// windows do not hold back, as Sync does, recording who asked and why;
// it returns the sync request's token. The reason is required. Only the
// replica that holds the stack takes an override.
func (d *Daemon) OverrideWindow(name string, by model.Principal, reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return "", ErrNoReason
	case len(reason) > MaxOverrideReason:
		return "", fmt.Errorf("%w of at most %d bytes", ErrNoReason, MaxOverrideReason)
	}
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil {
		return "", ErrUnknownStack
	}
	if !l.acts(st) {
		return "", fmt.Errorf("override a change window of stack %s on the replica that holds it (%s): %w", name, l.own.Holder(name), ErrNotOwner)
	}
	now := time.Now().UTC()
	st.rec.WindowOverride = &model.WindowOverride{By: by, Reason: reason, Time: now}
	l.log.Info("change windows overridden", "stack", name, "by", by.Kind+":"+by.Name, "reason", reason)
	token := now.Format(time.RFC3339Nano)
	l.sync(st, token)
	return token, nil
}
