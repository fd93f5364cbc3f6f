package rollout

import (
	"fmt"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// threeSteps is a set rolled out to dev, then canary, then prod one
// stack at a time.
func threeSteps() *spec.StackSet {
	return &spec.StackSet{Name: "web", Spec: spec.StackSetSpec{Strategy: &spec.RolloutStrategy{
		Type: "RollingSync",
		RollingSync: &spec.RollingSync{Steps: []spec.RolloutStep{
			{MatchLabels: map[string]string{"env": "dev"}},
			{MatchExpressions: []spec.LabelExpression{{Key: "env", Operator: "In", Values: []string{"canary"}}}},
			{MatchLabels: map[string]string{"env": "prod"}, MaxUpdate: "1"},
		}},
	}}}
}

// member is a stack of env targeting commit at generation 1 under
// request r1, never updated.
func member(name, env, commit string) model.RolloutMember {
	m := model.RolloutMember{Name: name, Commit: commit, Generation: 1, Request: "r1"}
	if env != "" {
		m.Labels = map[string]string{"env": env}
	}
	return m
}

// succeeded is m after an up succeeded on commit.
func succeeded(m model.RolloutMember, commit string) model.RolloutMember {
	m.Last = &model.LastUpdate{Generation: m.Generation, ReconcileRequest: m.Request, Type: model.UpdateUp,
		State: model.UpdateSucceeded, LastAttemptedCommit: commit, LastSuccessfulCommit: commit}
	return m
}

// failed is m after an up of commit failed, its last success being on
// applied.
func failed(m model.RolloutMember, commit, applied string) model.RolloutMember {
	m.Last = &model.LastUpdate{Generation: m.Generation, ReconcileRequest: m.Request, Type: model.UpdateUp,
		State: model.UpdateFailed, LastAttemptedCommit: commit, LastSuccessfulCommit: applied}
	return m
}

// fleet is the seven stacks of threeSteps: dev-1, dev-2, canary-1 and
// prod-1..4, all targeting commit, each changed by change (by name).
func fleet(commit string, change map[string]func(model.RolloutMember) model.RolloutMember) []model.RolloutMember {
	var out []model.RolloutMember
	add := func(name, env string) {
		m := member(name, env, commit)
		if f := change[name]; f != nil {
			m = f(m)
		}
		out = append(out, m)
	}
	add("prod-2", "prod") // not in name order: the plan sorts
	add("dev-1", "dev")
	add("dev-2", "dev")
	add("canary-1", "canary")
	add("prod-1", "prod")
	for i := 3; i <= 4; i++ {
		add(fmt.Sprint("prod-", i), "prod")
	}
	return out
}

// each applies f to every name.
func each(f func(model.RolloutMember) model.RolloutMember, names ...string) map[string]func(model.RolloutMember) model.RolloutMember {
	out := map[string]func(model.RolloutMember) model.RolloutMember{}
	for _, n := range names {
		out[n] = f
	}
	return out
}

// with merges changes.
func with(ms ...map[string]func(model.RolloutMember) model.RolloutMember) map[string]func(model.RolloutMember) model.RolloutMember {
	out := map[string]func(model.RolloutMember) model.RolloutMember{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func on(commit string) func(model.RolloutMember) model.RolloutMember {
	return func(m model.RolloutMember) model.RolloutMember { return succeeded(m, commit) }
}

// states is each stack's state in st, by name.
func states(st model.RolloutStatus) map[string]string {
	out := map[string]string{}
	for _, s := range st.Steps {
		for _, m := range s.Stacks {
			out[m.Name] = m.State
		}
	}
	return out
}
