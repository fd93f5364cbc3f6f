package model

import (
	"maps"
	"slices"
	"time"
)

// Gate states.
const (
	GateAwaiting     = "AwaitingApproval"
	GateApproved     = "Approved"
	GateRejected     = "Rejected"
	GateExpired      = "Expired"
	GatePolicyDenied = "PolicyDenied"
)

// Gate is an update that change control holds, and what it was made for:
// the commit, the spec's generation and the sync request. A newer one of
// any of these supersedes it.
type Gate struct {
	State string `json:"state"`
	// Type is the operation held: UpdateUp or UpdateDestroy (empty in
	// gates recorded before destroys were held: an up).
	Type string `json:"type,omitempty"`
	// Reason says why the plan needs approval, or why it was denied.
	Reason           string `json:"reason"`
	Commit           string `json:"commit"`
	Generation       int64  `json:"generation"`
	ReconcileRequest string `json:"reconcileRequest,omitempty"`
	// Update is the preview's update, whose log holds the full diff.
	Update string `json:"update"`
	// Plan is the saved plan that awaits approval (nil once discarded).
	Plan *Plan `json:"plan,omitempty"`
	// Changes and Steps are the plan's summary and its steps (secret
	// values "[secret]").
	Changes    map[string]int `json:"changes,omitempty"`
	Steps      []Step         `json:"steps,omitempty"`
	Violations []Violation    `json:"violations,omitempty"`
	Created    time.Time      `json:"created"`
	Expires    time.Time      `json:"expires,omitzero"`
	// Refused says why the plan approved before this one was not
	// applied: it no longer held.
	Refused string `json:"refused,omitempty"`
	// By, Decided and Comment say who approved or rejected the plan,
	// when, and why.
	By      string    `json:"by,omitempty"`
	Decided time.Time `json:"decided,omitzero"`
	Comment string    `json:"comment,omitempty"`
}

// Operation is the operation g holds: UpdateUp or UpdateDestroy.
func (g *Gate) Operation() string {
	if g.Type == "" {
		return UpdateUp
	}
	return g.Type
}

// PlanName names g's plan in messages: "plan ID", "destroy plan ID" for a
// destroy.
func (g *Gate) PlanName() string {
	id := ""
	if g.Plan != nil {
		id = g.Plan.ID
	}
	if g.Operation() == UpdateDestroy {
		return "destroy plan " + id
	}
	return "plan " + id
}

// Clone returns a deep copy of g.
func (g *Gate) Clone() *Gate {
	if g == nil {
		return nil
	}
	c := *g
	if g.Plan != nil {
		p := *g.Plan
		c.Plan = &p
	}
	c.Changes = maps.Clone(g.Changes)
	c.Steps = slices.Clone(g.Steps)
	c.Violations = slices.Clone(g.Violations)
	return &c
}
