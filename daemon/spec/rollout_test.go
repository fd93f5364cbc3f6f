package spec

import (
	"fmt"
	"testing"
)

func TestRolloutStepLimit(t *testing.T) {
	tests := []struct {
		max           string
		members, want int
	}{
		{"", 10, 0},
		{"1", 10, 1},
		{"3", 2, 3},
		{"25%", 10, 2},
		{"25%", 3, 1},
		{"25%", 0, 1},
		{"100%", 7, 7},
		{"50%", 7, 3},
		{"0", 5, 0},
		{"x%", 5, 0},
	}
	for _, tt := range tests {
		if got := (RolloutStep{MaxUpdate: tt.max}).Limit(tt.members); got != tt.want {
			t.Errorf("maxUpdate %q of %d: %d, want %d", tt.max, tt.members, got, tt.want)
		}
	}
}

func TestRolloutStepSelects(t *testing.T) {
	prod := map[string]string{"env": "prod", "region": "eu"}
	dev := map[string]string{"env": "dev"}
	in := func(op string, values ...string) RolloutStep {
		return RolloutStep{MatchExpressions: []LabelExpression{{Key: "region", Operator: op, Values: values}}}
	}
	tests := []struct {
		step      RolloutStep
		prod, dev bool
		str       string
	}{
		{RolloutStep{}, true, true, ""},
		{RolloutStep{MatchLabels: map[string]string{"env": "dev"}}, false, true, "env=dev"},
		{in(OpIn, "eu", "us"), true, false, "region in (eu,us)"},
		{in(OpNotIn, "eu"), false, true, "region notin (eu)"},
		{in(OpExists), true, false, "region"},
		{in(OpDoesNotExist), false, true, "!region"},
		{RolloutStep{MatchLabels: map[string]string{"env": "prod", "a": "b"}, MatchExpressions: in(OpIn, "eu").MatchExpressions}, false, false,
			"a=b, env=prod, region in (eu)"},
		{in("Near", "eu"), false, false, "region Near (eu)"},
	}
	for _, tt := range tests {
		if got := tt.step.Selects(prod); got != tt.prod {
			t.Errorf("%s selects prod: %v", tt.str, got)
		}
		if got := tt.step.Selects(dev); got != tt.dev {
			t.Errorf("%s selects dev: %v", tt.str, got)
		}
		if got := tt.step.String(); got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
	}
}

// BenchmarkRender10k renders 10,000 parameter sets through one template
// and decodes them into stacks.
func BenchmarkRender10k(b *testing.B) {
	l := newLoader()
	l.addFile("stacks.yaml", "/cfg", []byte(envSets))
	if len(l.diags.Errors()) > 0 || len(l.cfg.StackSets) != 1 {
		b.Fatalf("fixture: %v", l.diags)
	}
	set := l.cfg.StackSets[0]
	gens := make([]Generated, 10000)
	for i := range gens {
		gens[i] = Generated{
			Params:    map[string]any{"env": fmt.Sprintf("e%d", i), "region": "eu-west-1", "resync": int64(60)},
			Generator: "stackSets[0].generators[0]",
			Origin:    fmt.Sprintf("elements[%d]", i),
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		l.cfg.Stacks = nil
		for _, g := range gens {
			l.renderStack(set, g)
		}
		if len(l.cfg.Stacks) != len(gens) || len(l.diags.Errors()) > 0 {
			b.Fatalf("%d stacks: %v", len(l.cfg.Stacks), l.diags.Errors())
		}
	}
}
