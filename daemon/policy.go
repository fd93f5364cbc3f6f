package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Step is one resource operation that a preview plans.
type Step struct {
	// Op is the engine's operation: create, update, delete, replace,
	// create-replacement, delete-replaced, read, import, refresh, …
	Op   string `json:"op"`
	URN  string `json:"urn"`
	Type string `json:"type"`
	// Old and New are the resource's inputs before and after the step,
	// secret values as "[secret]"; nil where the step has none (no Old
	// for a create, no New for a delete).
	Old map[string]any `json:"old,omitempty"`
	New map[string]any `json:"new,omitempty"`
	// Diffs names the top-level input properties that change.
	Diffs []string `json:"diffs,omitempty"`
}

// Policy levels: a deny blocks the change, a warn is shown.
const (
	PolicyDeny = "deny"
	PolicyWarn = "warn"
)

// Operations a PolicyInput judges.
const (
	// PolicyUp: an update's preview (also a pull request's, which
	// previews an update).
	PolicyUp = "up"
	// PolicyDestroy: the preview of the destroy of a stack removed from
	// the config; its steps are the deletes.
	PolicyDestroy = "destroy"
)

// PolicyInput is what policies judge: one preview of one stack.
type PolicyInput struct {
	Stack string `json:"stack"`
	// Operation is what the preview is of: PolicyUp (the default when
	// empty) or PolicyDestroy.
	Operation string            `json:"operation"`
	Labels    map[string]string `json:"labels,omitempty"`
	Commit    string            `json:"commit"`
	// PullRequest and Author are set for a pull request's preview: its
	// number and its author's login on the forge.
	PullRequest int    `json:"pullRequest,omitempty"`
	Author      string `json:"author,omitempty"`
	// Steps are the preview's steps that change something ("same" steps
	// are left out).
	Steps []Step `json:"steps"`
}

// Violation is one message of one policy.
type Violation struct {
	// Policy names the rule's source: its package, as the operator wrote
	// it. It is a metric label, so it comes from the operator's policy
	// files, never from a program.
	Policy string `json:"policy"`
	// Level is PolicyDeny or PolicyWarn.
	Level   string `json:"level"`
	Message string `json:"message"`
}

// PolicyVerdict is the policies' judgement of one preview.
type PolicyVerdict struct {
	Deny []Violation `json:"deny,omitempty"`
	Warn []Violation `json:"warn,omitempty"`
}

// Denied says whether the change must not be applied.
func (v PolicyVerdict) Denied() bool { return len(v.Deny) > 0 }

// Scrubbed returns v with every message cleaned by clean, in new slices:
// a message may quote a secret value that the policies saw in clear.
func (v PolicyVerdict) Scrubbed(clean func(string) string) PolicyVerdict {
	scrub := func(vs []Violation) []Violation {
		out := slices.Clone(vs)
		for i := range out {
			out[i].Message = clean(out[i].Message)
		}
		return out
	}
	return PolicyVerdict{Deny: scrub(v.Deny), Warn: scrub(v.Warn)}
}

// JudgedSteps are the steps of r that policies judge: PolicySteps, secret
// values in clear, when the runner made them; else Steps.
func (r Result) JudgedSteps() []Step {
	if r.PolicySteps != nil {
		return r.PolicySteps
	}
	return r.Steps
}

// Policies judges previews; the policy package implements it. Evaluate
// must be safe for concurrent use. An error means the policies could not
// be evaluated: the caller treats it as a denial (fail closed).
type Policies interface {
	Evaluate(ctx context.Context, in PolicyInput) (PolicyVerdict, error)
}

// PolicyEvaluationFailed is the Violation.Policy of the denial that
// stands for a policy evaluation error.
const PolicyEvaluationFailed = "evaluation"

// JudgeSteps evaluates p on in, failing closed: an evaluation error is a
// denial that says why. A nil p allows everything.
func JudgeSteps(ctx context.Context, p Policies, in PolicyInput) PolicyVerdict {
	if p == nil {
		return PolicyVerdict{}
	}
	in.Labels = maps.Clone(in.Labels)
	if in.Operation == "" {
		in.Operation = PolicyUp
	}
	v, err := p.Evaluate(ctx, in)
	if err != nil {
		return PolicyVerdict{Deny: []Violation{{
			Policy:  PolicyEvaluationFailed,
			Level:   PolicyDeny,
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
func (d *Daemon) judge(ctx context.Context, j job, commit string, res Result) PolicyVerdict {
	if d.opts.Policies == nil {
		return PolicyVerdict{}
	}
	in := PolicyInput{Stack: j.st.rec.Name, Operation: PolicyUp, Labels: j.labels, Commit: commit, Steps: res.JudgedSteps()}
	if j.typ == UpdateDestroy {
		in.Operation = PolicyDestroy
	}
	v := JudgeSteps(ctx, d.opts.Policies, in).Scrubbed(d.red.With(res.PolicySecrets...).Clean)
	d.opts.Observer.PolicyEvaluated(in.Stack, v)
	return v
}
