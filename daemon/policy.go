package daemon

import (
	"context"
	"fmt"
	"maps"

	"github.com/stackd/stackd/model"
)

// Policies judges previews; the policy package implements it. Evaluate
// must be safe for concurrent use. An error means the policies could not
// be evaluated: the caller treats it as a denial (fail closed).
type Policies interface {
	Evaluate(ctx context.Context, in model.PolicyInput) (model.PolicyVerdict, error)
}

// PolicyEvaluationFailed is the Violation.Policy of the denial that
// stands for a policy evaluation error.
const PolicyEvaluationFailed = "evaluation"

// JudgeSteps evaluates p on in, failing closed: an evaluation error is a
// denial that says why. A nil p allows everything.
func JudgeSteps(ctx context.Context, p Policies, in model.PolicyInput) model.PolicyVerdict {
	if p == nil {
		return model.PolicyVerdict{}
	}
	in.Labels = maps.Clone(in.Labels)
	if in.Operation == "" {
		in.Operation = model.PolicyUp
	}
	v, err := p.Evaluate(ctx, in)
	if err != nil {
		return model.PolicyVerdict{Deny: []model.Violation{{
			Policy:  PolicyEvaluationFailed,
			Level:   model.PolicyDeny,
			Message: fmt.Sprintf("the policies could not be evaluated, so the change is blocked: %v", err),
		}}}
	}
	return v
}

// judge evaluates the daemon's policies on res, a preview of j's
// operation (an up, or a removed stack's destroy), and tells the Observer
// the outcome. The policies judge the real values of secrets; the verdict
// returned is scrubbed of them and of every secret the daemon knows, as
// it is logged, stored and shown.
func (d *Daemon) judge(ctx context.Context, j job, commit string, res model.Result) model.PolicyVerdict {
	if d.opts.Policies == nil {
		return model.PolicyVerdict{}
	}
	in := model.PolicyInput{Stack: j.st.rec.Name, Operation: model.PolicyUp, Labels: j.labels, Commit: commit, Steps: res.JudgedSteps()}
	if j.typ == model.UpdateDestroy {
		in.Operation = model.PolicyDestroy
	}
	v := JudgeSteps(ctx, d.opts.Policies, in).Scrubbed(d.red.With(res.PolicySecrets...).Clean)
	d.opts.Observer.PolicyEvaluated(in.Stack, v)
	return v
}
