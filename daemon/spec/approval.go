package spec

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Approval says which updates of a stack wait for approval: all that
// change something (Required), or those beyond a change budget. A plan
// needs approval when any of the budget's limits is passed: a step whose
// operation is in When, more than MaxChanges resources changing, or a
// change of a resource whose type matches one of Types. A plan within the
// budget applies by itself.
//
// The JSON form is how a removed stack's record keeps the approval its
// destroy needs.
type Approval struct {
	Required bool `yaml:"required" json:"required,omitempty"`
	// When lists operations that always need approval: create, update,
	// delete, replace.
	When []string `yaml:"when" json:"when,omitempty"`
	// MaxChanges is how many resources may change without approval; zero
	// sets no such limit.
	MaxChanges int `yaml:"maxChanges" json:"maxChanges,omitempty"`
	// Types are resource type globs ("aws:rds/*", "*" any text) whose
	// changes need approval.
	Types []string `yaml:"types" json:"types,omitempty"`
	// MaxAge is how long a plan waits for approval before it expires;
	// zero means DefaultPlanMaxAge.
	MaxAge Duration `yaml:"maxAge" json:"maxAge,omitzero"`
}

// ApprovalOr is the approval that applies to s: its own, else def (the
// daemon's --approval).
func (s *StackSpec) ApprovalOr(def *Approval) *Approval {
	if s.Approval != nil {
		return s.Approval
	}
	return def
}

// DefaultPlanMaxAge is how long a plan waits for approval unless
// approval.maxAge says otherwise.
const DefaultPlanMaxAge = 24 * time.Hour

// ApprovalOps are the operations approval.when may name.
var ApprovalOps = []string{"create", "update", "delete", "replace"}

// Gates says whether a asks for approval of anything at all.
func (a *Approval) Gates() bool {
	return a != nil && (a.Required || len(a.When) > 0 || a.MaxChanges > 0 || len(a.Types) > 0)
}

// PlanMaxAge is how long a plan waits for approval.
func (a *Approval) PlanMaxAge() time.Duration {
	if a == nil || a.MaxAge.Duration <= 0 {
		return DefaultPlanMaxAge
	}
	return a.MaxAge.Duration
}

// MatchType tells whether the resource type typ matches a's Types.
func (a *Approval) MatchType(typ string) bool {
	return slices.ContainsFunc(a.Types, func(glob string) bool { return globMatch(glob, typ) })
}

// problems lists what is wrong with a, by field path relative to it.
func (a *Approval) problems() [][2]string {
	var out [][2]string
	add := func(field, format string, args ...any) {
		out = append(out, [2]string{field, fmt.Sprintf(format, args...)})
	}
	for i, op := range a.When {
		if !slices.Contains(ApprovalOps, op) {
			add(indexPath("when", i), "unknown operation %q (one of %s)", op, strings.Join(ApprovalOps, ", "))
		}
	}
	for i, t := range a.Types {
		if strings.TrimSpace(t) == "" {
			add(indexPath("types", i), "empty entry")
		}
	}
	if a.MaxChanges < 0 {
		add("maxChanges", "must not be negative")
	}
	if a.MaxAge.Duration < 0 {
		add("maxAge", "must not be negative")
	}
	if a.Required && (len(a.When) > 0 || a.MaxChanges > 0 || len(a.Types) > 0) {
		add("required", "required: true needs approval of every change; leave out when, maxChanges and types, or set required: false")
	}
	return out
}

// approval checks spec.approval.
func (v *validator) approval(a *Approval) {
	if a == nil {
		return
	}
	for _, p := range a.problems() {
		v.errorf(joinPath("approval", p[0]), "%s", p[1])
	}
}

// ParseApproval reads the daemon's --approval: "required", "off" (or
// empty: no approval), or a spec's approval as a YAML flow mapping, such
// as "{when: [delete, replace], maxChanges: 20}". A nil result means no
// approval.
func ParseApproval(s string) (*Approval, error) {
	switch strings.TrimSpace(s) {
	case "", "off", "false":
		return nil, nil
	case "required", "true":
		return &Approval{Required: true}, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("--approval: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("--approval: want required, off, or a mapping such as {when: [delete], maxChanges: 20}")
	}
	nodes := 0
	d := newDecoder("--approval", &nodes)
	a := &Approval{}
	d.decode(doc.Content[0], "approval", reflect.ValueOf(a).Elem())
	if errs := d.diags.Errors(); len(errs) > 0 {
		return nil, &ConfigError{Diags: errs}
	}
	for _, p := range a.problems() {
		return nil, fmt.Errorf("--approval: %s: %s", p[0], p[1])
	}
	return a, nil
}
