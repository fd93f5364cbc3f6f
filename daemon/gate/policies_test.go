package gate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

type policiesFunc func(context.Context, model.PolicyInput) (model.PolicyVerdict, error)

func (f policiesFunc) Evaluate(ctx context.Context, in model.PolicyInput) (model.PolicyVerdict, error) {
	return f(ctx, in)
}

func TestJudgeSteps(t *testing.T) {
	deny := model.PolicyVerdict{Deny: []model.Violation{{Policy: "stackd.files", Level: model.PolicyDeny, Message: "no deletes"}}}
	tests := []struct {
		name       string
		p          Policies
		wantDenied bool
		wantPolicy string
		wantText   string
	}{
		{name: "no policies allow", p: nil},
		{name: "allow", p: policiesFunc(func(context.Context, model.PolicyInput) (model.PolicyVerdict, error) {
			return model.PolicyVerdict{}, nil
		})},
		{name: "deny", p: policiesFunc(func(context.Context, model.PolicyInput) (model.PolicyVerdict, error) { return deny, nil }),
			wantDenied: true, wantPolicy: "stackd.files", wantText: "no deletes"},
		{name: "error fails closed", p: policiesFunc(func(context.Context, model.PolicyInput) (model.PolicyVerdict, error) {
			return model.PolicyVerdict{}, errors.New("undefined function foo")
		}), wantDenied: true, wantPolicy: PolicyEvaluationFailed, wantText: "undefined function foo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgeSteps(context.Background(), tt.p, model.PolicyInput{Stack: "s", Labels: map[string]string{"env": "prod"}})
			if v.Denied() != tt.wantDenied {
				t.Fatalf("Denied() = %v, want %v (%+v)", v.Denied(), tt.wantDenied, v)
			}
			if !tt.wantDenied {
				return
			}
			if got := v.Deny[0]; got.Policy != tt.wantPolicy || got.Level != model.PolicyDeny || !strings.Contains(got.Message, tt.wantText) {
				t.Errorf("deny = %+v, want policy %q with %q", got, tt.wantPolicy, tt.wantText)
			}
		})
	}
}
