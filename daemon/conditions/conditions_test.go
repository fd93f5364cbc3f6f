package conditions

import (
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

func TestConditionsAndHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s model.StackStatus
	s.ObservedGeneration = 1
	if h := HealthOf(&s, 1); h.Status != model.HealthProgressing || h.Message != "Waiting for the stack to be reconciled" {
		t.Fatalf("empty status: %+v", h)
	}
	MarkReconciling(&s, model.ReasonStackProcessing, "stack is being processed", 1, t0)
	if h := HealthOf(&s, 1); h.Status != model.HealthProgressing || h.Message != "stack is being processed" {
		t.Fatalf("reconciling: %+v", h)
	}
	MarkReady(&s, 1, t0.Add(time.Minute))
	if len(s.Conditions) != 1 || s.Condition(model.ConditionReady).Status != "True" || s.Condition(model.ConditionReady).LastTransitionTime != t0.Add(time.Minute) {
		t.Fatalf("ready: %+v", s.Conditions)
	}
	if h := HealthOf(&s, 1); h.Status != model.HealthHealthy {
		t.Fatalf("ready health: %+v", h)
	}
	if h := HealthOf(&s, 2); h.Status != model.HealthProgressing || h.Message != "Waiting for the operator to observe the latest spec change" {
		t.Fatalf("unobserved generation: %+v", h)
	}
	MarkStalled(&s, model.ReasonUpdateFailed, FailureMessage("up", 3), 1, t0.Add(2*time.Minute))
	MarkStalled(&s, model.ReasonUpdateFailed, FailureMessage("up", 3), 1, t0.Add(3*time.Minute))
	st := s.Condition(model.ConditionStalled)
	if st == nil || st.LastTransitionTime != t0.Add(2*time.Minute) || s.Condition(model.ConditionReady).Reason != model.ReasonNotReadyStalled {
		t.Fatalf("stalled: %+v", s.Conditions)
	}
	if h := HealthOf(&s, 1); h.Status != model.HealthDegraded || h.Message != "up failed 3 times; not retrying until the spec or source changes" {
		t.Fatalf("stalled health: %+v", h)
	}
}
