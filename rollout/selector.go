package rollout

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
)

// This file holds the step's label selector and limit as the rollout
// reads them. They stand in for the spec's own methods of RolloutStep
// (Selects, Limit, String) until those exist, and are meant to be
// replaced by them.

// selects says whether step's selector selects labels, with Kubernetes'
// label selector semantics: every matchLabels pair and every expression
// must hold; NotIn and DoesNotExist hold for a missing key; an unknown
// operator holds for nothing; an empty selector selects every stack.
func selects(step *spec.RolloutStep, labels map[string]string) bool {
	for k, v := range step.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range step.MatchExpressions {
		v, ok := labels[e.Key]
		var holds bool
		switch e.Operator {
		case "In":
			holds = ok && slices.Contains(e.Values, v)
		case "NotIn":
			holds = !ok || !slices.Contains(e.Values, v)
		case "Exists":
			holds = ok
		case "DoesNotExist":
			holds = !ok
		}
		if !holds {
			return false
		}
	}
	return true
}

// limit resolves step's maxUpdate for a step of members stacks: 0 (no
// limit) when unset, a count ("2"), or a percentage ("25%") rounded down
// and at least 1. A value that is neither, or not positive, is 1: the
// spec's validation rejects it, and the rollout errs on the slow side.
func limit(step *spec.RolloutStep, members int) int {
	s := strings.TrimSpace(step.MaxUpdate)
	if s == "" {
		return 0
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return 1
		}
		return max(1, members*n/100)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 1
	}
	return n
}

// selectorString shows step's selector as kubectl does ("env=prod,tier
// in (a,b),!legacy"); "(every stack)" for an empty one.
func selectorString(step *spec.RolloutStep) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(step.MatchLabels)) {
		parts = append(parts, k+"="+step.MatchLabels[k])
	}
	for _, e := range step.MatchExpressions {
		switch e.Operator {
		case "In":
			parts = append(parts, e.Key+" in ("+strings.Join(e.Values, ",")+")")
		case "NotIn":
			parts = append(parts, e.Key+" notin ("+strings.Join(e.Values, ",")+")")
		case "Exists":
			parts = append(parts, e.Key)
		case "DoesNotExist":
			parts = append(parts, "!"+e.Key)
		default:
			parts = append(parts, e.Key+" "+e.Operator+" ("+strings.Join(e.Values, ",")+")")
		}
	}
	if len(parts) == 0 {
		return "(every stack)"
	}
	return strings.Join(parts, ",")
}
