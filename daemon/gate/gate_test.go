package gate

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestNeedsApproval(t *testing.T) {
	file := func(op, name string) model.Step {
		return model.Step{Op: op, URN: "urn:pulumi:dev::p::stackdtest:index:File::" + name, Type: "stackdtest:index:File"}
	}
	db := model.Step{Op: "update", URN: "urn:pulumi:dev::p::aws:rds/instance:Instance::db", Type: "aws:rds/instance:Instance"}
	replace := []model.Step{file("create-replacement", "a"), file("replace", "a"), file("delete-replaced", "a")}
	budget := &spec.Approval{When: []string{"delete", "replace"}, MaxChanges: 2, Types: []string{"aws:rds/*"}}
	for _, tc := range []struct {
		name  string
		a     *spec.Approval
		steps []model.Step
		want  bool
		why   string
	}{
		{"no approval", nil, []model.Step{file("delete", "a")}, false, ""},
		{"empty approval", &spec.Approval{}, []model.Step{file("delete", "a")}, false, ""},
		{"required, a change", &spec.Approval{Required: true}, []model.Step{file("update", "a")}, true, "approval is required: 1 resource(s) change"},
		{"required, no change", &spec.Approval{Required: true}, nil, false, ""},
		{"required, only reads", &spec.Approval{Required: true}, []model.Step{file("read", "a")}, false, ""},
		{"within the budget", budget, []model.Step{file("update", "a"), file("create", "b")}, false, ""},
		{"a delete", budget, []model.Step{file("delete", "a")}, true, "steps of approval.when: delete"},
		{"a replacement counts once", budget, append(replace, file("update", "b")), true, "approval.when: replace"},
		{"a replacement is no delete", &spec.Approval{When: []string{"delete"}}, replace, false, ""},
		{"too many", budget, []model.Step{file("update", "a"), file("update", "b"), file("create", "c")}, true, "3 resources change, more than approval.maxChanges 2"},
		{"a type", budget, []model.Step{db}, true, "resources of approval.types change: aws:rds/instance:Instance"},
		{"several limits", budget, []model.Step{db, file("delete", "a"), file("create", "b")}, true,
			"the plan has steps of approval.when: delete; 3 resources change, more than approval.maxChanges 2; resources of approval.types change: aws:rds/instance:Instance"},
		{"creates only", &spec.Approval{When: []string{"create"}}, []model.Step{file("create", "a")}, true, "approval.when: create"},
		{"the stack's root and providers do not count", &spec.Approval{Required: true}, append(rootAndProvider("create"), file("create", "a"), file("create", "b")),
			true, "approval is required: 2 resource(s) change"},
		{"only the root and a provider change", &spec.Approval{Required: true}, rootAndProvider("update"), false, ""},
		{"within the budget beside the root and a provider", budget, append(rootAndProvider("create"), file("create", "a"), file("create", "b")), false, ""},
		{"a provider's delete is no delete", budget, rootAndProvider("delete"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := NeedsApproval(tc.a, tc.steps)
			if got != tc.want || !strings.Contains(why, tc.why) || (!got && why != "") {
				t.Errorf("NeedsApproval = %v, %q; want %v, %q", got, why, tc.want, tc.why)
			}
		})
	}
}

// rootAndProvider are steps of op on a stack's root and its default
// provider.
func rootAndProvider(op string) []model.Step {
	return []model.Step{
		{Op: op, URN: "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", Type: "pulumi:pulumi:Stack"},
		{Op: op, URN: "urn:pulumi:dev::p::pulumi:providers:stackdtest::default", Type: "pulumi:providers:stackdtest"},
	}
}

// TestChanges: a plan's summary counts what NeedsApproval counts, the
// program's resources, a replacement once.
func TestChanges(t *testing.T) {
	file := func(op, name string) model.Step {
		return model.Step{Op: op, URN: "urn:pulumi:dev::p::stackdtest:index:File::" + name, Type: "stackdtest:index:File"}
	}
	for _, tc := range []struct {
		name  string
		steps []model.Step
		want  map[string]int
	}{
		{"none", nil, map[string]int{}},
		{"a first deploy", append(rootAndProvider("create"), file("create", "a"), file("create", "b"), file("create", "c")), map[string]int{"create": 3}},
		{"reads change nothing", []model.Step{file("read", "a"), file("refresh", "b")}, map[string]int{}},
		{"a replacement counts once", []model.Step{file("create-replacement", "a"), file("replace", "a"), file("delete-replaced", "a"), file("update", "b"), file("import", "c"), file("discard", "d")},
			map[string]int{"replace": 1, "update": 1, "create": 1, "delete": 1}},
		{"only the root and a provider", rootAndProvider("update"), map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Changes(tc.steps)
			if !maps.Equal(got, tc.want) {
				t.Errorf("Changes = %v, want %v", got, tc.want)
			}
			n := 0
			for _, c := range got {
				n += c
			}
			_, why := NeedsApproval(&spec.Approval{Required: true}, tc.steps)
			if want := fmt.Sprintf("%d resource(s) change", n); n > 0 && !strings.HasSuffix(why, want) || n == 0 && why != "" {
				t.Errorf("NeedsApproval says %q beside %d changes", why, n)
			}
		})
	}
}

func TestGateAction(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	gate := func(state string) *model.Gate {
		return &model.Gate{State: state, Commit: "c1", Generation: 2, ReconcileRequest: "r1", Expires: now.Add(time.Hour), Plan: &model.Plan{ID: "p"}}
	}
	obs := decide.Observation{Now: now, Commit: "c1", Generation: 2, ReconcileRequest: "r1"}
	with := func(f func(*decide.Observation)) decide.Observation { o := obs; f(&o); return o }
	for _, tc := range []struct {
		name  string
		g     *model.Gate
		o     decide.Observation
		wants bool
		want  string
		wait  time.Duration
	}{
		{"awaiting", gate(model.GateAwaiting), obs, true, Hold, time.Hour},
		{"awaiting, expired", gate(model.GateAwaiting), with(func(o *decide.Observation) { o.Now = now.Add(time.Hour) }), true, Expire, 0},
		{"approved", gate(model.GateApproved), obs, true, Apply, 0},
		{"approved, a newer commit", gate(model.GateApproved), with(func(o *decide.Observation) { o.Commit = "c2" }), true, Drop, 0},
		{"awaiting, a newer commit", gate(model.GateAwaiting), with(func(o *decide.Observation) { o.Commit = "c2" }), true, Drop, 0},
		{"approved, the spec changed", gate(model.GateApproved), with(func(o *decide.Observation) { o.Generation = 3 }), true, Drop, 0},
		{"rejected, a sync request", gate(model.GateRejected), with(func(o *decide.Observation) { o.ReconcileRequest = "r2" }), true, Drop, 0},
		{"rejected", gate(model.GateRejected), obs, true, Hold, 0},
		{"expired", gate(model.GateExpired), obs, true, Hold, 0},
		{"denied", gate(model.GatePolicyDenied), obs, true, Hold, 0},
		{"nothing to run any more", gate(model.GateAwaiting), obs, false, Drop, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, wait := Action(tc.g, tc.o, tc.wants)
			if got != tc.want || wait != tc.wait {
				t.Errorf("Action = %s, %v; want %s, %v", got, wait, tc.want, tc.wait)
			}
		})
	}
}

// BenchmarkNeedsApproval prints the cost of the approval decision per
// preview at 1 and 1,000 steps, with a budget of every kind of limit.
func BenchmarkNeedsApproval(b *testing.B) {
	a := &spec.Approval{When: []string{"delete", "replace"}, MaxChanges: 2000, Types: []string{"aws:rds/*", "gcp:sql/*"}}
	for _, n := range []int{1, 1000} {
		steps := make([]model.Step, n)
		for i := range steps {
			steps[i] = model.Step{Op: "update", URN: fmt.Sprintf("urn:pulumi:prod::app::aws:s3/bucket:Bucket::b%d", i), Type: "aws:s3/bucket:Bucket"}
		}
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			for b.Loop() {
				if wait, _ := NeedsApproval(a, steps); wait {
					b.Fatal("a plan within the budget waits")
				}
			}
		})
	}
}

// TestChangeControlled: which operations go through change control.
func TestChangeControlled(t *testing.T) {
	required := &spec.Approval{Required: true}
	for _, c := range []struct {
		name     string
		typ      string
		removed  bool
		policies bool
		a        *spec.Approval
		want     bool
	}{
		{"up, nothing asks", model.UpdateUp, false, false, nil, false},
		{"up, empty approval", model.UpdateUp, false, false, &spec.Approval{}, false},
		{"up, approval", model.UpdateUp, false, false, required, true},
		{"up, policies", model.UpdateUp, false, true, nil, true},
		{"destroy of a removed stack, nothing asks", model.UpdateDestroy, true, false, nil, false},
		{"destroy of a removed stack, approval", model.UpdateDestroy, true, false, &spec.Approval{When: []string{"delete"}}, true},
		{"destroy of a removed stack, policies", model.UpdateDestroy, true, true, nil, true},
		{"refresh", model.UpdateRefresh, false, true, required, false},
		{"drift check", model.UpdateDrift, false, true, required, false},
		{"preview", model.UpdatePreview, false, true, required, false},
	} {
		if got := ChangeControlled(c.typ, c.removed, c.policies, c.a); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGateActionDestroy: a destroy's gate binds the generation and the
// sync request, not a commit (a removed stack deploys none); it is
// dropped when the destroy is no longer wanted (the stack is back).
func TestGateActionDestroy(t *testing.T) {
	now := time.Now()
	o := decide.Observation{Now: now, Generation: 3, ReconcileRequest: "r1"}
	awaiting := func(mut func(*model.Gate)) *model.Gate {
		g := &model.Gate{Type: model.UpdateDestroy, State: model.GateAwaiting, Commit: "1111111111111111111111111111111111111111", Generation: 3, ReconcileRequest: "r1", Expires: now.Add(time.Hour)}
		if mut != nil {
			mut(g)
		}
		return g
	}
	for _, c := range []struct {
		name  string
		g     *model.Gate
		o     decide.Observation
		wants bool
		want  string
	}{
		{"waiting", awaiting(nil), o, true, Hold},
		{"approved", awaiting(func(g *model.Gate) { g.State = model.GateApproved }), o, true, Apply},
		{"denied", awaiting(func(g *model.Gate) { g.State = model.GatePolicyDenied }), o, true, Hold},
		{"expired", awaiting(func(g *model.Gate) { g.Expires = now }), o, true, Expire},
		{"the stack is back", awaiting(nil), o, false, Drop},
		{"a sync request", awaiting(nil), decide.Observation{Now: now, Generation: 3, ReconcileRequest: "r2"}, true, Drop},
		{"an up's gate binds the commit", awaiting(func(g *model.Gate) { g.Type = model.UpdateUp }), o, true, Drop},
		{"an older gate without a type is an up's", awaiting(func(g *model.Gate) { g.Type = "" }), o, true, Drop},
	} {
		if got, _ := Action(c.g, c.o, c.wants); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestVerdictLog: the log names each warning and denial with its policy,
// and for a denial the resources the change would have changed, each
// once; steps that change nothing are not listed.
func TestVerdictLog(t *testing.T) {
	const file = "urn:pulumi:app::e2e::stackdtest:index:File::note"
	const other = "urn:pulumi:app::e2e::stackdtest:index:File::other"
	deny := model.Violation{Policy: "stackd.files", Level: model.PolicyDeny, Message: "deleting /out/note.txt is not allowed"}
	warn := model.Violation{Policy: "stackd.review", Level: model.PolicyWarn, Message: "pull request 4 by alice"}
	steps := []model.Step{
		{Op: "same", URN: "urn:pulumi:app::e2e::pulumi:pulumi:Stack::e2e-app"},
		{Op: "delete", URN: file},
		{Op: "create-replacement", URN: other}, {Op: "replace", URN: other}, {Op: "delete-replaced", URN: other},
		{Op: "read", URN: "urn:pulumi:app::e2e::stackdtest:index:File::read"},
	}
	for _, c := range []struct {
		name    string
		verdict model.PolicyVerdict
		steps   []model.Step
		want    string
	}{
		{"allowed", model.PolicyVerdict{}, steps, ""},
		{"warned", model.PolicyVerdict{Warn: []model.Violation{warn}}, steps,
			"policy warning (stackd.review): pull request 4 by alice\n"},
		{"denied", model.PolicyVerdict{Deny: []model.Violation{deny}, Warn: []model.Violation{warn}}, steps,
			"policy warning (stackd.review): pull request 4 by alice\n" +
				"policy denial (stackd.files): deleting /out/note.txt is not allowed\n" +
				"the change denied, 2 resource(s):\n" +
				"  delete " + file + "\n" +
				"  replace " + other + "\n" +
				"the change is held: nothing was applied\n"},
		{"denied, no changes", model.PolicyVerdict{Deny: []model.Violation{{Policy: "evaluation", Message: "cannot evaluate"}}}, steps[:1],
			"policy denial (evaluation): cannot evaluate\nthe change is held: nothing was applied\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := VerdictLog(c.verdict, c.steps); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
