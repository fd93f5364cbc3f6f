package view

import (
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// StackSummary is a stack in the list's summary view (?view=summary):
// what a table of stacks shows, about a tenth of the full view.
type StackSummary struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed,omitempty"`
	// Orphaned says why a stack whose source is no longer configured is
	// kept.
	Orphaned string `json:"orphaned,omitempty"`
	// Health is Healthy, Progressing, Degraded, AwaitingApproval or
	// Unknown, Argo CD's word; Condition is the PKO condition behind it
	// (Stalled, AwaitingApproval or Reconciling, whichever is True),
	// Reason and Message its reason and message.
	Health    string `json:"health"`
	Ready     string `json:"ready,omitempty"`
	Condition string `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	// Source is the config source that defines the stack; Tracking what
	// it follows.
	Source   string `json:"source,omitempty"`
	Tracking string `json:"tracking,omitempty"`
	// LastUpdate is the last finished update; Running the one in flight.
	LastUpdate *SummaryUpdate `json:"lastUpdate,omitempty"`
	Running    string         `json:"running,omitempty"`
	// Drift is the last drift check's state.
	Drift  string `json:"drift,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Owner is "StackSet/NAME" for a stack a StackSet generates.
	Owner string `json:"owner,omitempty"`
	// Retry is a failing stack's next attempt, while it has some left.
	Retry *model.Retry `json:"retry,omitempty"`
}

// SummaryUpdate is the last finished update in a StackSummary.
type SummaryUpdate struct {
	Name     string    `json:"name"`
	Type     string    `json:"type"`
	State    string    `json:"state"`
	Commit   string    `json:"lastSuccessfulCommit,omitempty"`
	Time     time.Time `json:"lastResyncTime,omitzero"`
	Failures int64     `json:"failures,omitempty"`
}

// SummaryOf is v's summary.
func SummaryOf(v *model.StackView) StackSummary {
	s := StackSummary{Name: v.Name, Removed: v.Removed, Orphaned: v.Orphaned, Health: "Unknown", Source: v.Source, Tracking: v.Tracking, Holder: v.Holder, Owner: v.Owner}
	if h := v.Status.Health; h != nil && h.Status != "" {
		s.Health = h.Status
	}
	if c := v.Status.Condition(model.ConditionReady); c != nil {
		s.Ready = c.Status
	}
	if c := Explaining(&v.Status); c != nil {
		s.Condition, s.Reason, s.Message = c.Type, c.Reason, c.Message
	}
	if lu := v.Status.LastUpdate; lu != nil {
		s.LastUpdate = &SummaryUpdate{Name: lu.Name, Type: lu.Type, State: lu.State, Commit: lu.LastSuccessfulCommit,
			Time: lu.LastResyncTime, Failures: lu.Failures}
	}
	if cu := v.Status.CurrentUpdate; cu != nil {
		s.Running = cu.Name
	}
	if d := v.Status.Drift; d != nil {
		s.Drift = d.State
	}
	s.Retry = v.Status.Retry
	return s
}

// Explaining is the condition that explains a stack's health, the first
// of Stalled, AwaitingApproval and Reconciling that is True; nil when
// none is (a Ready stack).
func Explaining(s *model.StackStatus) *model.Condition {
	for _, typ := range []string{model.ConditionStalled, model.ConditionAwaitingApproval, model.ConditionReconciling} {
		if c := s.Condition(typ); c != nil && c.Status == "True" {
			return c
		}
	}
	return nil
}

// ConditionWord is c as kubectl's columns of a PKO Stack name it:
// "Stalled/UpdateFailed", or the type alone when the reason repeats it.
func ConditionWord(c *model.Condition) string {
	if c.Reason == "" || c.Reason == c.Type {
		return c.Type
	}
	return c.Type + "/" + c.Reason
}
