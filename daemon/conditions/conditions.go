package conditions

import (
	"fmt"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// The status of a condition.
const (
	True  = "True"
	False = "False"
)

// MarkReady sets Ready=True and drops Reconciling and Stalled, as PKO's
// MarkReadyCondition does.
func MarkReady(s *model.StackStatus, generation int64, now time.Time) {
	setCondition(s, model.Condition{Type: model.ConditionReady, Status: True, Reason: model.ReasonProcessingCompleted,
		Message: "the stack has been processed and is up to date"}, generation, now)
	Remove(s, model.ConditionReconciling)
	Remove(s, model.ConditionStalled)
	Remove(s, model.ConditionAwaitingApproval)
}

// MarkReconciling sets Reconciling=True with reason and message, and
// Ready=False.
func MarkReconciling(s *model.StackStatus, reason, message string, generation int64, now time.Time) {
	setCondition(s, model.Condition{Type: model.ConditionReady, Status: False, Reason: model.ReasonNotReadyInProgress,
		Message: "reconciliation is in progress"}, generation, now)
	setCondition(s, model.Condition{Type: model.ConditionReconciling, Status: True, Reason: reason, Message: message}, generation, now)
	Remove(s, model.ConditionStalled)
	Remove(s, model.ConditionAwaitingApproval)
}

// MarkStalled sets Stalled=True with reason and message, and Ready=False.
func MarkStalled(s *model.StackStatus, reason, message string, generation int64, now time.Time) {
	setCondition(s, model.Condition{Type: model.ConditionReady, Status: False, Reason: model.ReasonNotReadyStalled,
		Message: "reconciliation is stalled"}, generation, now)
	setCondition(s, model.Condition{Type: model.ConditionStalled, Status: True, Reason: reason, Message: message}, generation, now)
	Remove(s, model.ConditionReconciling)
	Remove(s, model.ConditionAwaitingApproval)
}

// MarkAwaitingApproval sets AwaitingApproval=True with message, and
// Ready=False: a plan waits for a person's decision.
func MarkAwaitingApproval(s *model.StackStatus, message string, generation int64, now time.Time) {
	setCondition(s, model.Condition{Type: model.ConditionReady, Status: False, Reason: model.ReasonAwaitingApproval,
		Message: "a plan awaits approval"}, generation, now)
	setCondition(s, model.Condition{Type: model.ConditionAwaitingApproval, Status: True, Reason: model.ReasonAwaitingApproval, Message: message}, generation, now)
	Remove(s, model.ConditionReconciling)
	Remove(s, model.ConditionStalled)
}

// setCondition replaces the condition of c's type, keeping its transition
// time when its status does not change.
func setCondition(s *model.StackStatus, c model.Condition, generation int64, now time.Time) {
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

// Remove drops the condition of type typ.
func Remove(s *model.StackStatus, typ string) {
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
func HealthOf(s *model.StackStatus, generation int64) model.Health {
	if s.ObservedGeneration != generation {
		return model.Health{Status: model.HealthProgressing, Message: "Waiting for the operator to observe the latest spec change"}
	}
	for _, c := range s.Conditions {
		if c.Status != True {
			continue
		}
		switch c.Type {
		case model.ConditionAwaitingApproval:
			return model.Health{Status: model.HealthAwaitingApproval, Message: c.Message}
		case model.ConditionStalled:
			return model.Health{Status: model.HealthDegraded, Message: c.Message}
		case model.ConditionReconciling:
			return model.Health{Status: model.HealthProgressing, Message: c.Message}
		case model.ConditionReady:
			return model.Health{Status: model.HealthHealthy, Message: c.Message}
		}
	}
	return model.Health{Status: model.HealthProgressing, Message: "Waiting for the stack to be reconciled"}
}

// FailureMessage is PKO's message for a stack that stopped retrying.
func FailureMessage(typ string, failures int64) string {
	return fmt.Sprintf("%s failed %d times; not retrying until the spec or source changes", typ, failures)
}

// Worse says whether health a is worse than b: Degraded, then
// Progressing, then Healthy.
func Worse(a, b string) bool {
	rank := map[string]int{model.HealthHealthy: 0, model.HealthProgressing: 1, model.HealthDegraded: 2}
	return rank[a] > rank[b]
}
