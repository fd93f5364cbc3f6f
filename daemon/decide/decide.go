package decide

import (
	"fmt"
	"math"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// PKO's constants.
const (
	// DefaultResync is the resync and branch-poll period of a spec that
	// sets none.
	DefaultResync = 60 * time.Second
	// DefaultMaxBackoff caps the retry backoff unless the spec sets
	// retryMaxBackoffDurationSeconds.
	DefaultMaxBackoff = 24 * time.Hour
	// DefaultMaxFailures is how many consecutive failures stall a stack.
	DefaultMaxFailures = 3
	// BaseBackoff is the first retry delay after a failure.
	BaseBackoff = 10 * time.Second
)

// Observation is everything Decide needs about a stack at one moment.
type Observation struct {
	Now              time.Time
	Generation       int64  // the spec's current generation
	ReconcileRequest string // the current sync request token
	Commit           string // the commit the source points at now
	// SkippedCommit is a commit that changes nothing the stack deploys
	// (spec.paths): it counts as the last successful commit.
	SkippedCommit    string
	Removed          bool // the stack left the config
	Preview          bool
	DestroyOnRemoval bool // spec.destroyOnFinalize
	ContinueResync   bool // spec.continueResyncOnCommitMatch
	ResyncPeriod     time.Duration
	MaxBackoff       time.Duration
	MaxFailures      int64
	// BackoffBase is the first retry delay (10s when zero).
	BackoffBase time.Duration
}

// Decision is what to do next for a stack.
type Decision struct {
	// Run asks for an operation of type Type, recorded with Reason (PKO's
	// event message, also used as the update's message).
	Run    bool
	Type   string
	Reason string
	// Finalize says the stack's removal is complete: its record may go.
	Finalize bool
	// Stalled says retries stopped until the spec, the commit or a sync
	// request changes.
	Stalled bool
	// RecheckAfter is when time alone could change the decision; zero
	// when only an event (new commit, spec change, sync request) can.
	RecheckAfter time.Duration
	// NewCommit says that only a new commit asks for the run (after a
	// success): if it changes nothing under spec.paths, nothing runs.
	NewCommit bool
}

// Decide is PKO's isSynced decision table (stack_controller.go), evaluated
// top-down, for the last finished update last (nil when there is none).
// It is pure: same inputs, same decision.
func Decide(last *model.LastUpdate, o Observation) Decision {
	switch {
	case o.Removed && (!o.DestroyOnRemoval || o.Preview):
		return Decision{Finalize: true}
	case last == nil && o.Removed:
		// Never deployed by stackd, but it may exist in the backend from
		// before: PKO destroys it too (one that does not exist is done).
		return o.run("Stack marked for deletion")
	case last == nil:
		return o.run("Initial stack update")
	case last.Generation != o.Generation:
		if o.Removed {
			return o.run("Stack marked for deletion")
		}
		return o.run(fmt.Sprintf("New stack generation: %d", o.Generation))
	case last.ReconcileRequest != o.ReconcileRequest:
		return o.run(fmt.Sprintf("Sync request: %q", o.ReconcileRequest))
	case last.State == model.UpdateSucceeded:
		return decideAfterSuccess(last, o)
	default:
		return decideAfterFailure(last, o)
	}
}

func decideAfterSuccess(last *model.LastUpdate, o Observation) Decision {
	switch {
	case o.Removed && last.Type == model.UpdateDestroy:
		return Decision{Finalize: true}
	case o.Removed:
		return o.run("Stack marked for deletion")
	case o.Commit != "" && last.LastSuccessfulCommit != o.Commit && o.Commit != o.SkippedCommit:
		d := o.run(fmt.Sprintf("New commit detected: %q", o.Commit))
		d.NewCommit = true
		return d
	case !o.ContinueResync:
		return Decision{}
	}
	due := last.LastResyncTime.Add(o.ResyncPeriod)
	if !o.Now.Before(due) {
		return o.run(fmt.Sprintf("Resync time elapsed: %s", o.ResyncPeriod))
	}
	return Decision{RecheckAfter: recheck(due.Sub(o.Now))}
}

func decideAfterFailure(last *model.LastUpdate, o Observation) Decision {
	if !o.Removed && o.Commit != "" && last.LastAttemptedCommit != o.Commit {
		return o.run(fmt.Sprintf("New commit detected: %q", o.Commit))
	}
	if last.Failures >= o.FailureLimit() {
		return Decision{Stalled: true}
	}
	wait := BackoffFrom(o.BackoffBase, last.Failures-1, o.MaxBackoff)
	due := last.LastResyncTime.Add(wait)
	if !o.Now.Before(due) {
		return o.run(fmt.Sprintf("Backoff time elapsed: %s", wait))
	}
	return Decision{RecheckAfter: recheck(due.Sub(o.Now))}
}

func (o Observation) run(reason string) Decision {
	return Decision{Run: true, Type: o.RunType(), Reason: reason}
}

// RunType is the type of the operation a run of the stack is: a destroy
// once removed, a preview with spec.preview, else an up.
func (o Observation) RunType() string {
	switch {
	case o.Removed:
		return model.UpdateDestroy
	case o.Preview:
		return model.UpdatePreview
	}
	return model.UpdateUp
}

// FailureLimit is MaxFailures, or DefaultMaxFailures when not set.
func (o Observation) FailureLimit() int64 {
	if o.MaxFailures <= 0 {
		return DefaultMaxFailures
	}
	return o.MaxFailures
}

// recheck never asks for less than a second, as PKO's requeue does.
func recheck(d time.Duration) time.Duration {
	return max(d, time.Second)
}

// Backoff is PKO's cooldown after failures consecutive failures:
// 10s·3^failures capped by limit (DefaultMaxBackoff when zero); the first
// step, 10s, is never capped.
func Backoff(failures int64, limit time.Duration) time.Duration {
	return BackoffFrom(BaseBackoff, failures, limit)
}

// BackoffFrom is Backoff with another first step (BaseBackoff when
// zero or less); tests shorten it.
func BackoffFrom(base time.Duration, failures int64, limit time.Duration) time.Duration {
	if base <= 0 {
		base = BaseBackoff
	}
	if failures <= 0 {
		return base
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	d := float64(base) * math.Pow(3, float64(failures))
	if d >= float64(limit) {
		return limit
	}
	return time.Duration(d)
}

// NextFailures is the count of consecutive failed updates once one more
// failed: 1 for the first. It grows only while the last update failed
// with the same generation, sync request and commit; a success, a new
// spec, a new sync request or a new commit restarts it, so that each gets
// the whole retry budget. (PKO counts from 0 and does not restart on a new
// commit: a stalled stack then stalls again at the first failure of the
// commit that fixes it.)
func NextFailures(last *model.LastUpdate, generation int64, request, commit string) int64 {
	if last == nil || last.State != model.UpdateFailed || last.Generation != generation ||
		last.ReconcileRequest != request || last.LastAttemptedCommit != commit {
		return 1
	}
	return last.Failures + 1
}

// ResyncPeriod is the resync and branch-poll period of spec: its
// resyncFrequencySeconds (DefaultResync when unset), raised to floor.
func ResyncPeriod(spec *spec.StackSpec, floor time.Duration) time.Duration {
	period := DefaultResync
	if spec.ResyncFrequencySeconds > 0 {
		period = time.Duration(spec.ResyncFrequencySeconds) * time.Second
	}
	return max(period, floor)
}

// MaxBackoff is spec's cap on the retry backoff.
func MaxBackoff(spec *spec.StackSpec) time.Duration {
	if spec.RetryMaxBackoffDurationSeconds > 0 {
		return time.Duration(spec.RetryMaxBackoffDurationSeconds) * time.Second
	}
	return DefaultMaxBackoff
}
