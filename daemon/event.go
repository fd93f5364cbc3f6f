package daemon

import (
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Event kinds a Notifier hears about.
const (
	EventDriftDetected  = "drift_detected"
	EventDriftResolved  = "drift_resolved"
	EventUpdateFailed   = "update_failed"
	EventStackStalled   = "stack_stalled"
	EventStackRecovered = "stack_recovered"
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

// Notifier delivers events (webhooks, chat). Notify must not block: the
// reconcile loop calls it with its lock held.
type Notifier interface {
	Notify(e Event)
}

type nopNotifier struct{}

func (nopNotifier) Notify(Event) {}
