package decide

import (
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// DriftDue says whether stack s (nil once it left the config), whose
// status is st, should be checked for drift now, and if not, how long
// until it should (0: not until something changes). Only a stack whose
// last update succeeded is checked, against the commit it applied. every
// is the daemon's interval (zero: none), honoured down to floor, the
// resync floor; the spec's schedule or interval comes first.
func DriftDue(s *spec.Stack, st *model.StackStatus, every, floor time.Duration, now time.Time) (bool, time.Duration) {
	last := st.LastUpdate
	if s == nil || s.Spec.Preview || last == nil || last.State != model.UpdateSucceeded || last.LastSuccessfulCommit == "" || last.Type != model.UpdateUp {
		return false, 0
	}
	var lastCheck time.Time
	if dr := st.Drift; dr != nil {
		lastCheck = dr.LastCheck
	}
	var due time.Time
	if sched := driftSchedule(s); sched != nil {
		if lastCheck.IsZero() {
			lastCheck = last.LastResyncTime
		}
		if due = sched.Next(lastCheck.UTC()); due.IsZero() {
			return false, 0
		}
	} else if every := driftInterval(s, every, floor); every > 0 {
		due = lastCheck.Add(every)
	} else {
		return false, 0
	}
	if now.Before(due) {
		return false, due.Sub(now)
	}
	return true, 0
}

// driftInterval is how often s is checked for drift; zero means never.
func driftInterval(s *spec.Stack, every, floor time.Duration) time.Duration {
	if dd := s.Spec.DriftDetection; dd != nil && dd.Interval.Duration > 0 {
		every = dd.Interval.Duration
	}
	if every <= 0 {
		return 0
	}
	return max(every, floor)
}

// driftSchedule is s's cron schedule of drift checks, or nil.
func driftSchedule(s *spec.Stack) *spec.Cron {
	dd := s.Spec.DriftDetection
	if dd == nil || dd.Schedule == "" {
		return nil
	}
	sched, err := spec.ParseCron(dd.Schedule) // validated when loaded
	if err != nil {
		return nil
	}
	return sched
}
