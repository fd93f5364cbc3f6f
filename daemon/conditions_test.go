package daemon

import (
	"testing"
	"time"
)

func TestConditionsAndHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s StackStatus
	s.ObservedGeneration = 1
	if h := HealthOf(&s, 1); h.Status != HealthProgressing || h.Message != "Waiting for the stack to be reconciled" {
		t.Fatalf("empty status: %+v", h)
	}
	s.MarkReconciling(ReasonStackProcessing, "stack is being processed", 1, t0)
	if h := HealthOf(&s, 1); h.Status != HealthProgressing || h.Message != "stack is being processed" {
		t.Fatalf("reconciling: %+v", h)
	}
	s.MarkReady(1, t0.Add(time.Minute))
	if len(s.Conditions) != 1 || s.Condition(ConditionReady).Status != "True" || s.Condition(ConditionReady).LastTransitionTime != t0.Add(time.Minute) {
		t.Fatalf("ready: %+v", s.Conditions)
	}
	if h := HealthOf(&s, 1); h.Status != HealthHealthy {
		t.Fatalf("ready health: %+v", h)
	}
	if h := HealthOf(&s, 2); h.Status != HealthProgressing || h.Message != "Waiting for the operator to observe the latest spec change" {
		t.Fatalf("unobserved generation: %+v", h)
	}
	s.MarkStalled(ReasonUpdateFailed, failureMessage("up", 3), 1, t0.Add(2*time.Minute))
	s.MarkStalled(ReasonUpdateFailed, failureMessage("up", 3), 1, t0.Add(3*time.Minute))
	st := s.Condition(ConditionStalled)
	if st == nil || st.LastTransitionTime != t0.Add(2*time.Minute) || s.Condition(ConditionReady).Reason != ReasonNotReadyStalled {
		t.Fatalf("stalled: %+v", s.Conditions)
	}
	if h := HealthOf(&s, 1); h.Status != HealthDegraded || h.Message != "up failed 3 times; not retrying until the spec or source changes" {
		t.Fatalf("stalled health: %+v", h)
	}
}
