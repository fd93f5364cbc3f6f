package model

import "slices"

// Plan is a saved plan and digests of what it was made against. The
// digests are keyed or of encrypted data: they reveal no secret.
type Plan struct {
	// ID names the plan among the stack's plans.
	ID string `json:"id"`
	// Digest is the SHA-256 of the plan file; for a destroy's plan, which
	// has no file, a keyed digest of Config and State.
	Digest string `json:"digest"`
	// Config digests the stack's config, its secrets and its environment.
	Config string `json:"config"`
	// State digests the stack's state (its checkpoint) the plan starts
	// from.
	State string `json:"state"`
}

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
