package notify

import (
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Event kinds a Notifier hears about.
const (
	DriftDetected  = "drift_detected"
	DriftResolved  = "drift_resolved"
	UpdateFailed   = "update_failed"
	StackStalled   = "stack_stalled"
	StackRecovered = "stack_recovered"
	// PreviewFailed: a pull request's preview of a stack failed.
	PreviewFailed = "preview_failed"
	// ApprovalNeeded: a stack's plan waits for approval.
	ApprovalNeeded = "approval_needed"
	// RolloutHalted: a stack of a StackSet failed on a new revision, and
	// the set's rollout holds every later stack (Stack names the first
	// that failed).
	RolloutHalted = "rollout_halted"
)

// Event is a change of a stack that people want to hear about. It holds
// no secret: messages are scrubbed, drift names properties, not values.
type Event struct {
	Kind    string            `json:"event"`
	Stack   string            `json:"stack"`
	Time    time.Time         `json:"time"`
	Message string            `json:"message"`
	Update  string            `json:"update,omitempty"`
	Commit  string            `json:"commit,omitempty"`
	Drift   *spec.DriftStatus `json:"drift,omitempty"`
}
