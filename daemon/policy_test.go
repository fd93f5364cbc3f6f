package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type policiesFunc func(context.Context, PolicyInput) (PolicyVerdict, error)

func (f policiesFunc) Evaluate(ctx context.Context, in PolicyInput) (PolicyVerdict, error) {
	return f(ctx, in)
}

func TestJudgeSteps(t *testing.T) {
	deny := PolicyVerdict{Deny: []Violation{{Policy: "stackd.files", Level: PolicyDeny, Message: "no deletes"}}}
	tests := []struct {
		name       string
		p          Policies
		wantDenied bool
		wantPolicy string
		wantText   string
	}{
		{name: "no policies allow", p: nil},
		{name: "allow", p: policiesFunc(func(context.Context, PolicyInput) (PolicyVerdict, error) { return PolicyVerdict{}, nil })},
		{name: "deny", p: policiesFunc(func(context.Context, PolicyInput) (PolicyVerdict, error) { return deny, nil }),
			wantDenied: true, wantPolicy: "stackd.files", wantText: "no deletes"},
		{name: "error fails closed", p: policiesFunc(func(context.Context, PolicyInput) (PolicyVerdict, error) {
			return PolicyVerdict{}, errors.New("undefined function foo")
		}), wantDenied: true, wantPolicy: PolicyEvaluationFailed, wantText: "undefined function foo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgeSteps(context.Background(), tt.p, PolicyInput{Stack: "s", Labels: map[string]string{"env": "prod"}})
			if v.Denied() != tt.wantDenied {
				t.Fatalf("Denied() = %v, want %v (%+v)", v.Denied(), tt.wantDenied, v)
			}
			if !tt.wantDenied {
				return
			}
			if got := v.Deny[0]; got.Policy != tt.wantPolicy || got.Level != PolicyDeny || !strings.Contains(got.Message, tt.wantText) {
				t.Errorf("deny = %+v, want policy %q with %q", got, tt.wantPolicy, tt.wantText)
			}
		})
	}
}
