package rollout

import (
	"testing"

	"github.com/stackd/stackd/daemon/spec"
)

// TestSelects: Kubernetes' label selector semantics.
func TestSelects(t *testing.T) {
	labels := map[string]string{"env": "prod", "region": "eu"}
	expr := func(key, op string, values ...string) spec.RolloutStep {
		return spec.RolloutStep{MatchExpressions: []spec.LabelExpression{{Key: key, Operator: op, Values: values}}}
	}
	cases := []struct {
		name string
		step spec.RolloutStep
		want bool
		str  string
	}{
		{"empty selects all", spec.RolloutStep{}, true, "(every stack)"},
		{"matchLabels", spec.RolloutStep{MatchLabels: map[string]string{"region": "eu", "env": "prod"}}, true, "env=prod,region=eu"},
		{"matchLabels other value", spec.RolloutStep{MatchLabels: map[string]string{"env": "dev"}}, false, "env=dev"},
		{"In", expr("env", "In", "dev", "prod"), true, "env in (dev,prod)"},
		{"In missing key", expr("tier", "In", "web"), false, "tier in (web)"},
		{"NotIn", expr("env", "NotIn", "prod"), false, "env notin (prod)"},
		{"NotIn missing key", expr("tier", "NotIn", "web"), true, "tier notin (web)"},
		{"Exists", expr("region", "Exists"), true, "region"},
		{"DoesNotExist", expr("region", "DoesNotExist"), false, "!region"},
		{"unknown operator", expr("env", "Gt", "1"), false, "env Gt (1)"},
	}
	for _, tc := range cases {
		if got := selects(&tc.step, labels); got != tc.want {
			t.Errorf("%s: selects %v, want %v", tc.name, got, tc.want)
		}
		if got := selectorString(&tc.step); got != tc.str {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.str)
		}
	}
}

// TestLimit: maxUpdate as a count or a percentage of the step's stacks.
func TestLimit(t *testing.T) {
	cases := []struct {
		max     string
		members int
		want    int
	}{{"", 10, 0}, {"3", 10, 3}, {"25%", 10, 2}, {"25%", 3, 1}, {"100%", 7, 7}, {"0", 5, 1}, {"x", 5, 1}, {"-2%", 5, 1}}
	for _, tc := range cases {
		if got := limit(&spec.RolloutStep{MaxUpdate: tc.max}, tc.members); got != tc.want {
			t.Errorf("maxUpdate %q of %d stacks: %d, want %d", tc.max, tc.members, got, tc.want)
		}
	}
}
