package spec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RollingSyncStrategy is the strategy type of a rollout in steps.
const RollingSyncStrategy = "RollingSync"

// The operators of a LabelExpression.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// parseMaxUpdate reads a maxUpdate: a count of at least 1 ("3") or a
// percentage from 1 to 100 ("25%"). The message never quotes s.
func parseMaxUpdate(s string) (n int, percent bool, err error) {
	digits, percent := strings.CutSuffix(s, "%")
	n, err = strconv.Atoi(digits)
	switch {
	case err != nil || strings.TrimSpace(digits) != digits || strings.HasPrefix(digits, "+"):
		return 0, false, errors.New("maxUpdate is a count (2) or a percentage of the step's stacks (25%)")
	case percent && (n < 1 || n > 100):
		return 0, false, errors.New("a maxUpdate percentage is from 1% to 100%")
	case n < 1:
		return 0, false, errors.New("maxUpdate is at least 1")
	}
	return n, percent, nil
}

// Limit is how many of a step's members stacks may update at once: 0
// when unlimited (MaxUpdate unset or not valid), a count as written, or
// a percentage of members rounded down and at least 1.
func (s RolloutStep) Limit(members int) int {
	if s.MaxUpdate == "" {
		return 0
	}
	n, percent, err := parseMaxUpdate(s.MaxUpdate)
	switch {
	case err != nil:
		return 0
	case percent:
		return max(members*n/100, 1)
	}
	return n
}

// Selects reports whether a stack with labels belongs to the step: it
// carries every label of MatchLabels and meets every expression, as a
// Kubernetes label selector (NotIn and DoesNotExist hold for a stack
// without the label). A step with neither selects every stack.
func (s RolloutStep) Selects(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		if !e.Matches(labels) {
			return false
		}
	}
	return true
}

// Matches reports whether labels meet the expression; an unknown
// operator matches nothing.
func (e LabelExpression) Matches(labels map[string]string) bool {
	v, ok := labels[e.Key]
	switch e.Operator {
	case OpIn:
		return ok && slices.Contains(e.Values, v)
	case OpNotIn:
		return !ok || !slices.Contains(e.Values, v)
	case OpExists:
		return ok
	case OpDoesNotExist:
		return !ok
	}
	return false
}

// String writes the step's selector as Kubernetes does, matchLabels (by
// key) then expressions, comma-separated: "env=dev, tier in (db,web)",
// "region", "!canary". It is empty for a step that selects every stack.
func (s RolloutStep) String() string {
	var parts []string
	for _, k := range sortedKeys(s.MatchLabels) {
		parts = append(parts, k+"="+s.MatchLabels[k])
	}
	for _, e := range s.MatchExpressions {
		parts = append(parts, e.String())
	}
	return strings.Join(parts, ", ")
}

// String writes the expression as a Kubernetes selector does:
// "env in (prod,staging)", "env notin (dev)", "env", "!env".
func (e LabelExpression) String() string {
	switch e.Operator {
	case OpIn, OpNotIn:
		return fmt.Sprintf("%s %s (%s)", e.Key, strings.ToLower(e.Operator), strings.Join(e.Values, ","))
	case OpExists:
		return e.Key
	case OpDoesNotExist:
		return "!" + e.Key
	}
	return fmt.Sprintf("%s %s (%s)", e.Key, e.Operator, strings.Join(e.Values, ","))
}
