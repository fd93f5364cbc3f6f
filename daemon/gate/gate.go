package gate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// stepKind is the approval.when operation a step belongs to: a
// replacement's steps are all "replace"; steps that change nothing
// (read, refresh) have none.
func stepKind(op string) string {
	switch op {
	case "create", "import":
		return "create"
	case "update":
		return "update"
	case "delete", "discard":
		return "delete"
	case "replace", "create-replacement", "delete-replaced", "discard-replaced", "import-replacement":
		return "replace"
	}
	return ""
}

// Changes is a plan's summary: how many of the program's resources
// (model.ProgramResource: not the stack's root, not providers) each kind
// of change (create, update, delete, replace) changes, from its steps;
// a replacement's steps count once. NeedsApproval counts the same.
func Changes(steps []model.Step) map[string]int {
	kinds := changedResources(steps)
	out := make(map[string]int)
	for _, kind := range kinds {
		out[kind]++
	}
	return out
}

// changedResources is the kind of change of each program resource that
// steps change, by URN.
func changedResources(steps []model.Step) map[string]string {
	kinds := map[string]string{}
	for _, s := range steps {
		if kind := stepKind(s.Op); kind != "" && model.ProgramResource(s.Type) {
			if kinds[s.URN] != "replace" {
				kinds[s.URN] = kind
			}
		}
	}
	return kinds
}

// NeedsApproval says whether a plan with steps must wait for approval
// under a, and why. It looks at the program's resources only, as Changes
// counts them: a plan that changes none never waits; with a nil or empty
// a nothing waits. It is pure.
func NeedsApproval(a *spec.Approval, steps []model.Step) (bool, string) {
	if !a.Gates() {
		return false, ""
	}
	changed := changedResources(steps)
	var ops, types []string
	for _, s := range steps {
		kind := changed[s.URN]
		if kind == "" || stepKind(s.Op) == "" {
			continue
		}
		if slices.Contains(a.When, kind) && !slices.Contains(ops, kind) {
			ops = append(ops, kind)
		}
		if a.MatchType(s.Type) && !slices.Contains(types, s.Type) {
			types = append(types, s.Type)
		}
	}
	var why []string
	switch {
	case len(changed) == 0:
		return false, ""
	case a.Required:
		return true, fmt.Sprintf("approval is required: %d resource(s) change", len(changed))
	}
	if len(ops) > 0 {
		why = append(why, "the plan has steps of approval.when: "+strings.Join(ops, ", "))
	}
	if a.MaxChanges > 0 && len(changed) > a.MaxChanges {
		why = append(why, fmt.Sprintf("%d resources change, more than approval.maxChanges %d", len(changed), a.MaxChanges))
	}
	if len(types) > 0 {
		why = append(why, "resources of approval.types change: "+strings.Join(types, ", "))
	}
	return len(why) > 0, strings.Join(why, "; ")
}

// Actions of Action.
const (
	// Drop: the gate no longer holds anything (superseded, or the
	// change is not wanted any more): discard it and decide as usual.
	Drop = "drop"
	// Hold: nothing runs.
	Hold = "hold"
	// Expire: the plan is too old: discard it and hold.
	Expire = "expire"
	// Apply: run the up or the destroy constrained to the approved
	// plan.
	Apply = "apply"
)

// Action decides what a stack held by g does when Decide says run g's
// operation (wants) or not, given what the stack would deploy now (o). A
// gate binds the generation and the sync request it was made for, and an
// up's gate the commit too (a removed stack deploys no commit); the runner
// checks the rest (the plan file, the config and the state). It is pure.
// wait is when time alone changes the action (an expiry).
func Action(g *model.Gate, o decide.Observation, wants bool) (action string, wait time.Duration) {
	if !wants || g.Generation != o.Generation || g.ReconcileRequest != o.ReconcileRequest ||
		(g.Operation() == model.UpdateUp && g.Commit != o.Commit) {
		return Drop, 0
	}
	switch g.State {
	case model.GateAwaiting:
		if !o.Now.Before(g.Expires) {
			return Expire, 0
		}
		return Hold, g.Expires.Sub(o.Now)
	case model.GateApproved:
		return Apply, 0
	}
	return Hold, 0
}

// ApprovalOf is the approval that applies to a stack: that of its spec
// s, or for a removed stack (s nil) that of its last spec gone, else the
// one its record kept (ds: gone is not known after a restart); and the
// daemon's default def where none is set. It is pure.
func ApprovalOf(s, gone *spec.Stack, ds *model.DestroySpec, def *spec.Approval) *spec.Approval {
	switch {
	case s != nil:
		return s.Spec.ApprovalOr(def)
	case gone != nil:
		return gone.Spec.ApprovalOr(def)
	case ds != nil && ds.Approval != nil:
		return ds.Approval
	}
	return def
}

// LabelsOf are the labels of a stack, as ApprovalOf chooses its spec.
func LabelsOf(s, gone *spec.Stack, ds *model.DestroySpec) map[string]string {
	switch {
	case s != nil:
		return s.Labels
	case gone != nil:
		return gone.Labels
	case ds != nil:
		return ds.Labels
	}
	return nil
}

// ChangeControlled says whether an operation of type typ goes through
// change control: an up of a stack in the config, or the destroy of a
// removed one, when the daemon has policies or the approval a asks for
// approval of anything. Refreshes, drift checks and previews change
// nothing that policies judge. It is pure.
func ChangeControlled(typ string, removed, policies bool, a *spec.Approval) bool {
	switch {
	case typ == model.UpdateUp && !removed, typ == model.UpdateDestroy && removed:
		return policies || a.Gates()
	}
	return false
}

// PreviewOf is the preview that comes before op under change control,
// and what it previews: for an up, a preview with a saved plan and the
// diff; for a destroy, a destroy preview that binds a plan (it neither
// exports nor removes anything).
func PreviewOf(op model.Operation) (model.Operation, string) {
	pre := op
	pre.SavePlan = true
	if op.Type == model.UpdateDestroy {
		pre.PreviewOnly, pre.Export, pre.Remove, pre.ContinueOnError = true, false, false, false
		return pre, "destroy"
	}
	pre.Type, pre.Diff = model.UpdatePreview, true
	return pre, "update"
}

// VerdictLog is what an operation's log says of the policies' verdict
// v on a preview with steps: a line per warning; when v denies, a line
// per denial (the policy and its message), the resources the change
// would have changed (each once, with its kinds of change), and that
// nothing was applied. The messages are as v has them: scrubbed of
// secrets by the caller. It is pure.
func VerdictLog(v model.PolicyVerdict, steps []model.Step) string {
	var b strings.Builder
	for _, w := range v.Warn {
		fmt.Fprintf(&b, "policy warning (%s): %s\n", w.Policy, w.Message)
	}
	if !v.Denied() {
		return b.String()
	}
	for _, d := range v.Deny {
		fmt.Fprintf(&b, "policy denial (%s): %s\n", d.Policy, d.Message)
	}
	var urns []string
	kinds := map[string][]string{}
	for _, s := range steps {
		kind := stepKind(s.Op)
		if kind == "" {
			continue
		}
		if _, seen := kinds[s.URN]; !seen {
			urns = append(urns, s.URN)
		}
		if !slices.Contains(kinds[s.URN], kind) {
			kinds[s.URN] = append(kinds[s.URN], kind)
		}
	}
	if len(urns) > 0 {
		fmt.Fprintf(&b, "the change denied, %d resource(s):\n", len(urns))
		for _, u := range urns {
			fmt.Fprintf(&b, "  %s %s\n", strings.Join(kinds[u], ", "), u)
		}
	}
	b.WriteString("the change is held: nothing was applied\n")
	return b.String()
}

// DenialMessage lists the policies' denials.
func DenialMessage(deny []model.Violation) string {
	msgs := make([]string, len(deny))
	for i, v := range deny {
		msgs[i] = v.Policy + ": " + v.Message
	}
	return "denied by policy: " + strings.Join(msgs, "; ")
}

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
