package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/model"
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

// NeedsApproval says whether a plan with steps must wait for approval
// under a, and why. A plan that changes nothing never waits; with a nil
// or empty a nothing waits. It is pure.
func NeedsApproval(a *spec.Approval, steps []model.Step) (bool, string) {
	if !a.Gates() {
		return false, ""
	}
	changed := map[string]bool{}
	var ops, types []string
	for _, s := range steps {
		kind := stepKind(s.Op)
		if kind == "" {
			continue
		}
		changed[s.URN] = true
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
