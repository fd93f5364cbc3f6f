// Package window decides whether a change window lets a stack change
// now, and when it next will: Argo CD's sync windows, for stacks. It is
// pure: the same windows, stack, change and time give the same verdict.
package window

import (
	"slices"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Horizon bounds the search for the next open time: a stack that no
// window lets change within it is told it has none.
const Horizon = 366 * 24 * time.Hour

// maxSteps bounds that search in steps (window starts and ends), for
// schedules that start every few minutes.
const maxSteps = 5000

// Stack is what a window's selector looks at.
type Stack struct {
	Name   string
	Labels map[string]string
}

// Verdict is the windows' answer for one stack and one change.
type Verdict struct {
	// Open says whether the change may run now.
	Open bool
	// NextOpen, when closed, is the first time it may run, by the
	// windows alone; zero when none is found within Horizon.
	NextOpen time.Time
	// Closing names the windows that close it now: the active deny
	// windows, or, when none is active, the allow windows of which none
	// is.
	Closing []*spec.ChangeWindow
	// Manual, when closed, says that a sync a person asks for may run
	// all the same: every window of Closing has manualSync. These are
	// the windows Argo CD asks it of: the active deny windows, or the
	// allow windows when none is active.
	Manual bool
}

// Lets says whether the change may run now: when the windows are open,
// or, for a sync a person asked for (manual), when they let those
// through.
func (v Verdict) Lets(manual bool) bool {
	return v.Open || manual && v.Manual
}

// Names names the windows that close, for messages.
func (v Verdict) Names() []string {
	names := make([]string, len(v.Closing))
	for i, w := range v.Closing {
		names[i] = w.String()
	}
	return names
}

// Until is NextOpen in the time zone of the first window that closes;
// zero when open or when no window opens within Horizon.
func (v Verdict) Until() time.Time {
	if v.NextOpen.IsZero() || len(v.Closing) == 0 {
		return time.Time{}
	}
	return v.NextOpen.In(v.Closing[0].Location())
}

// Check applies the windows that select s and gate change at now: any
// active deny window closes; where allow windows apply, one must be
// active; otherwise the change may run.
func Check(windows []*spec.ChangeWindow, s Stack, change string, now time.Time) Verdict {
	ws := applicable(windows, s, change)
	v := Verdict{Open: true}
	if closing := closedBy(ws, now); len(closing) > 0 {
		v.Open, v.Closing = false, closing
		v.NextOpen = nextOpen(ws, now)
		v.Manual = !slices.ContainsFunc(closing, func(w *spec.ChangeWindow) bool { return !w.ManualSync })
	}
	return v
}

// Active says whether w is active at t: an occurrence started in
// (t-duration, t].
func Active(w *spec.ChangeWindow, t time.Time) bool {
	start := w.Cron().Next(t.In(w.Location()).Add(-w.Duration.Duration))
	return !start.IsZero() && !start.After(t)
}

// applicable keeps the windows that select s and gate change.
func applicable(windows []*spec.ChangeWindow, s Stack, change string) []*spec.ChangeWindow {
	var out []*spec.ChangeWindow
	for _, w := range windows {
		if w.Gates(change) && w.Selects(s.Name, s.Labels) {
			out = append(out, w)
		}
	}
	return out
}

// closedBy lists the windows that close at t; none when open.
func closedBy(ws []*spec.ChangeWindow, t time.Time) []*spec.ChangeWindow {
	var deny, allow []*spec.ChangeWindow
	allowActive := false
	for _, w := range ws {
		active := Active(w, t)
		switch {
		case w.Kind == spec.WindowDeny && active:
			deny = append(deny, w)
		case w.Kind == spec.WindowAllow:
			allow = append(allow, w)
			allowActive = allowActive || active
		}
	}
	switch {
	case len(deny) > 0:
		return deny
	case len(allow) > 0 && !allowActive:
		return allow
	}
	return nil
}

// nextOpen walks from now to the next time the windows are open: from
// one moment where the state may change (an active deny window's end, an
// allow window's start) to the next.
func nextOpen(ws []*spec.ChangeWindow, now time.Time) time.Time {
	limit := now.Add(Horizon)
	t := now
	for range maxSteps {
		next, ok := nextChange(ws, t)
		if !ok || next.After(limit) {
			return time.Time{}
		}
		if t = next; len(closedBy(ws, t)) == 0 {
			return t
		}
	}
	return time.Time{}
}

// nextChange is the first moment after t where a window of ws may stop
// closing: the end of the first occurrence of an active deny window that
// started, or the start of an allow window.
func nextChange(ws []*spec.ChangeWindow, t time.Time) (time.Time, bool) {
	var best time.Time
	consider := func(c time.Time) {
		if !c.IsZero() && c.After(t) && (best.IsZero() || c.Before(best)) {
			best = c
		}
	}
	for _, w := range ws {
		local := t.In(w.Location())
		switch w.Kind {
		case spec.WindowDeny:
			if start := w.Cron().Next(local.Add(-w.Duration.Duration)); !start.IsZero() && !start.After(t) {
				consider(start.Add(w.Duration.Duration))
			}
		case spec.WindowAllow:
			consider(w.Cron().Next(local))
		}
	}
	return best, !best.IsZero()
}
