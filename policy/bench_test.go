package policy

import (
	"context"
	"fmt"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// benchPolicies is a realistic set: protected types, a change budget,
// required tags, a production rule on authors, and warnings.
var benchPolicies = map[string]string{
	"files.rego": noDelete,
	"prod.rego":  labels,
	"protect.rego": `package org.protect

protected := {"aws:rds/instance:Instance", "aws:s3/bucket:Bucket", "stackdtest:index:File"}

deny contains msg if {
	some s in input.steps
	s.op in {"delete", "replace", "delete-replaced"}
	s.type in protected
	s.old.protect != true
	msg := sprintf("%s %s is protected", [s.op, s.urn])
}
`,
	"budget.rego": `package org.budget

changes := count([s | some s in input.steps; s.op != "read"])

deny contains msg if {
	input.labels.tier == "critical"
	changes > 500
	msg := sprintf("%d changes exceed the budget of 500", [changes])
}

warn contains msg if {
	changes > 100
	msg := sprintf("a large change: %d steps", [changes])
}
`,
	"tags.rego": `package org.tags

deny contains msg if {
	some s in input.steps
	s.op in {"create", "update"}
	startswith(s.type, "aws:")
	not s.new.tags.owner
	msg := sprintf("%s needs an owner tag", [s.urn])
}

warn contains msg if {
	some s in input.steps
	s.new.content == "[secret]"
	msg := sprintf("%s holds a secret", [s.urn])
}
`,
}

// benchInput is a preview of n steps: creates, updates and a few
// deletes of Files, with inputs.
func benchInput(n int) model.PolicyInput {
	in := model.PolicyInput{Stack: "web", Commit: "0123456789abcdef0123456789abcdef01234567",
		Labels: map[string]string{"env": "staging", "tier": "critical"}}
	for i := range n {
		op := []string{"create", "update", "update", "create", "delete"}[i%5]
		s := step(op, fmt.Sprintf("f%d", i))
		inputs := map[string]any{"path": fmt.Sprintf("out/f%d.txt", i), "content": "some content", "tags": map[string]any{"owner": "ops"}}
		if op != "create" {
			s.Old = inputs
		}
		if op != "delete" {
			s.New = inputs
			s.Diffs = []string{"content"}
		}
		in.Steps = append(in.Steps, s)
	}
	return in
}

// BenchmarkEvaluate prints the cost of judging one preview of 1 and 1,000
// steps with benchPolicies, and how many messages it yields.
func BenchmarkEvaluate(b *testing.B) {
	set, err := Compile(context.Background(), benchPolicies)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			in := benchInput(n)
			var v model.PolicyVerdict
			for b.Loop() {
				if v, err = set.Evaluate(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/preview")
			b.ReportMetric(float64(len(v.Deny)+len(v.Warn)), "messages")
		})
	}
}

// BenchmarkCompile prints the cost of loading benchPolicies (a reload).
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Compile(context.Background(), benchPolicies); err != nil {
			b.Fatal(err)
		}
	}
}
