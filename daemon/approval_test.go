package daemon

import (
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/spec"
)

func TestNeedsApproval(t *testing.T) {
	file := func(op, name string) Step {
		return Step{Op: op, URN: "urn:pulumi:dev::p::stackdtest:index:File::" + name, Type: "stackdtest:index:File"}
	}
	db := Step{Op: "update", URN: "urn:pulumi:dev::p::aws:rds/instance:Instance::db", Type: "aws:rds/instance:Instance"}
	replace := []Step{file("create-replacement", "a"), file("replace", "a"), file("delete-replaced", "a")}
	budget := &spec.Approval{When: []string{"delete", "replace"}, MaxChanges: 2, Types: []string{"aws:rds/*"}}
	for _, tc := range []struct {
		name  string
		a     *spec.Approval
		steps []Step
		want  bool
		why   string
	}{
		{"no approval", nil, []Step{file("delete", "a")}, false, ""},
		{"empty approval", &spec.Approval{}, []Step{file("delete", "a")}, false, ""},
		{"required, a change", &spec.Approval{Required: true}, []Step{file("update", "a")}, true, "approval is required: 1 resource(s) change"},
		{"required, no change", &spec.Approval{Required: true}, nil, false, ""},
		{"required, only reads", &spec.Approval{Required: true}, []Step{file("read", "a")}, false, ""},
		{"within the budget", budget, []Step{file("update", "a"), file("create", "b")}, false, ""},
		{"a delete", budget, []Step{file("delete", "a")}, true, "steps of approval.when: delete"},
		{"a replacement counts once", budget, append(replace, file("update", "b")), true, "approval.when: replace"},
		{"a replacement is no delete", &spec.Approval{When: []string{"delete"}}, replace, false, ""},
		{"too many", budget, []Step{file("update", "a"), file("update", "b"), file("create", "c")}, true, "3 resources change, more than approval.maxChanges 2"},
		{"a type", budget, []Step{db}, true, "resources of approval.types change: aws:rds/instance:Instance"},
		{"several limits", budget, []Step{db, file("delete", "a"), file("create", "b")}, true,
			"the plan has steps of approval.when: delete; 3 resources change, more than approval.maxChanges 2; resources of approval.types change: aws:rds/instance:Instance"},
		{"creates only", &spec.Approval{When: []string{"create"}}, []Step{file("create", "a")}, true, "approval.when: create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := NeedsApproval(tc.a, tc.steps)
			if got != tc.want || !strings.Contains(why, tc.why) || (!got && why != "") {
				t.Errorf("NeedsApproval = %v, %q; want %v, %q", got, why, tc.want, tc.why)
			}
		})
	}
}
