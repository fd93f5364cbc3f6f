package daemon

import (
	"fmt"
	"time"
)

// Condition reasons, PKO's strings.
const (
	ReasonProcessingCompleted      = "ProcessingCompleted"
	ReasonNotReadyInProgress       = "NotReadyInProgress"
	ReasonNotReadyStalled          = "NotReadyStalled"
	ReasonStackProcessing          = "StackProcessing"
	ReasonRetryingAfterFailure     = "RetryingAfterFailure"
	ReasonPreviewFailed            = "PreviewFailed"
	ReasonPrerequisiteNotSatisfied = "PrerequisiteNotSatisfied"
	ReasonSpecInvalid              = "SpecInvalid"
	ReasonSourceUnavailable        = "SourceUnavailable"
	ReasonUpdateFailed             = "UpdateFailed"
	ReasonWorkspaceFailed          = "WorkspaceFailed"
	// ReasonChangeWindowClosed is stackd's own: a change waits for a
	// change window to open.
	ReasonChangeWindowClosed = "ChangeWindowClosed"
	// stackd's own: change control.
	ReasonAwaitingApproval = "AwaitingApproval"
	ReasonPolicyDenied     = "PolicyDenied"
	ReasonPlanRejected     = "PlanRejected"
	ReasonPlanExpired      = "PlanExpired"
	ReasonPlanStale        = "PlanStale"
)

// Argo CD health statuses.
const (
	HealthHealthy     = "Healthy"
	HealthProgressing = "Progressing"
	HealthDegraded    = "Degraded"
	// HealthAwaitingApproval is stackd's own: nothing is wrong, a person
	// has to decide.
	HealthAwaitingApproval = "AwaitingApproval"
)

const (
	conditionTrue  = "True"
	conditionFalse = "False"
)

// MarkReady sets Ready=True and drops Reconciling and Stalled, as PKO's
// MarkReadyCondition does.
func (s *StackStatus) MarkReady(generation int64, now time.Time) {
	s.setCondition(Condition{Type: ConditionReady, Status: conditionTrue, Reason: ReasonProcessingCompleted,
		Message: "the stack has been processed and is up to date"}, generation, now)
	s.removeCondition(ConditionReconciling)
	s.removeCondition(ConditionStalled)
	s.removeCondition(ConditionAwaitingApproval)
}

// MarkReconciling sets Reconciling=True with reason and message, and
// Ready=False.
func (s *StackStatus) MarkReconciling(reason, message string, generation int64, now time.Time) {
	s.setCondition(Condition{Type: ConditionReady, Status: conditionFalse, Reason: ReasonNotReadyInProgress,
		Message: "reconciliation is in progress"}, generation, now)
	s.setCondition(Condition{Type: ConditionReconciling, Status: conditionTrue, Reason: reason, Message: message}, generation, now)
	s.removeCondition(ConditionStalled)
	s.removeCondition(ConditionAwaitingApproval)
}

// MarkStalled sets Stalled=True with reason and message, and Ready=False.
func (s *StackStatus) MarkStalled(reason, message string, generation int64, now time.Time) {
	s.setCondition(Condition{Type: ConditionReady, Status: conditionFalse, Reason: ReasonNotReadyStalled,
		Message: "reconciliation is stalled"}, generation, now)
	s.setCondition(Condition{Type: ConditionStalled, Status: conditionTrue, Reason: reason, Message: message}, generation, now)
	s.removeCondition(ConditionReconciling)
	s.removeCondition(ConditionAwaitingApproval)
}

// MarkAwaitingApproval sets AwaitingApproval=True with message, and
// Ready=False: a plan waits for a person's decision.
func (s *StackStatus) MarkAwaitingApproval(message string, generation int64, now time.Time) {
	s.setCondition(Condition{Type: ConditionReady, Status: conditionFalse, Reason: ReasonAwaitingApproval,
		Message: "a plan awaits approval"}, generation, now)
	s.setCondition(Condition{Type: ConditionAwaitingApproval, Status: conditionTrue, Reason: ReasonAwaitingApproval, Message: message}, generation, now)
	s.removeCondition(ConditionReconciling)
	s.removeCondition(ConditionStalled)
}

// Condition returns the condition of type typ, or nil.
func (s *StackStatus) Condition(typ string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setCondition replaces the condition of c's type, keeping its transition
// time when its status does not change.
func (s *StackStatus) setCondition(c Condition, generation int64, now time.Time) {
	c.ObservedGeneration, c.LastTransitionTime = generation, now
	if old := s.Condition(c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

func (s *StackStatus) removeCondition(typ string) {
	kept := s.Conditions[:0]
	for _, c := range s.Conditions {
		if c.Type != typ {
			kept = append(kept, c)
		}
	}
	s.Conditions = kept
}

// HealthOf maps a status to Argo CD's health of a PKO Stack, as its
// health check (resource_customizations/pulumi.com/Stack/health.lua) does.
func HealthOf(s *StackStatus, generation int64) Health {
	if s.ObservedGeneration != generation {
		return Health{HealthProgressing, "Waiting for the operator to observe the latest spec change"}
	}
	for _, c := range s.Conditions {
		if c.Status != conditionTrue {
			continue
		}
		switch c.Type {
		case ConditionAwaitingApproval:
			return Health{HealthAwaitingApproval, c.Message}
		case ConditionStalled:
			return Health{HealthDegraded, c.Message}
		case ConditionReconciling:
			return Health{HealthProgressing, c.Message}
		case ConditionReady:
			return Health{HealthHealthy, c.Message}
		}
	}
	return Health{HealthProgressing, "Waiting for the stack to be reconciled"}
}

// failureMessage is PKO's message for a stack that stopped retrying.
func failureMessage(typ string, failures int64) string {
	return fmt.Sprintf("%s failed %d times; not retrying until the spec or source changes", typ, failures)
}
