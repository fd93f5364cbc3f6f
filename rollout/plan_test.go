package rollout

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

const (
	succ = model.MemberSucceeded
	upd  = model.MemberUpdating
	wait = model.MemberWaiting
	fail = model.MemberFailed
	pend = model.MemberPending
)

var devAll = []string{"dev-1", "dev-2"}
var prodAll = []string{"prod-1", "prod-2", "prod-3", "prod-4"}

// TestPlanAndAdmit walks the three-step rollout of commit c2 over seven
// stacks that all succeeded on c1. For each case it checks the plan and
// what a fresh Controller's Admit says of some stacks (hold: the reason
// and a part of the message; "" admits).
func TestPlanAndAdmit(t *testing.T) {
	devDone := each(on("c2"), devAll...)
	fromC1 := each(on("c1"), append(append([]string{"canary-1"}, devAll...), prodAll...)...)
	canaryFailed := map[string]func(model.RolloutMember) model.RolloutMember{
		"canary-1": func(m model.RolloutMember) model.RolloutMember { return failed(m, "c2", "c1") },
	}
	type hold struct{ reason, msg string }
	cases := []struct {
		name      string
		commit    string
		change    map[string]func(model.RolloutMember) model.RolloutMember
		aborted   Aborted
		state     string
		step      int
		members   map[string]string // every stack's state
		admit     map[string]hold
		haltedBy  []string
		inMessage string
	}{{
		name: "new commit: dev moves first", commit: "c2", change: fromC1,
		state: model.RolloutProgressing, step: 1,
		members: map[string]string{"dev-1": pend, "dev-2": pend, "canary-1": wait, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit: map[string]hold{"dev-1": {}, "canary-1": {model.ReasonRolloutWaiting, "step 2 of 3 waits for step 1: 0 of 2"},
			"prod-1": {model.ReasonRolloutWaiting, "step 3 of 3 waits for step 1"}},
	}, {
		// Argo CD #29410: the earlier steps' stacks succeeded (and are
		// healthy) on the previous commit; that does not let prod move.
		name: "earlier steps succeeded on the previous commit only", commit: "c2", change: with(fromC1, each(on("c2"), "dev-1")),
		state: model.RolloutProgressing, step: 1,
		members: map[string]string{"dev-1": succ, "dev-2": pend, "canary-1": wait, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit:   map[string]hold{"prod-3": {model.ReasonRolloutWaiting, "waits for step 1: 1 of 2 stacks succeeded"}, "canary-1": {model.ReasonRolloutWaiting, "waits for step 1"}},
	}, {
		name: "an earlier stack whose target is not known holds the later steps", commit: "c2",
		change: with(devDone, map[string]func(model.RolloutMember) model.RolloutMember{
			"dev-2": func(m model.RolloutMember) model.RolloutMember { m = succeeded(m, "c1"); m.Commit = ""; return m },
		}),
		state: model.RolloutProgressing, step: 1,
		members: map[string]string{"dev-1": succ, "dev-2": pend, "canary-1": wait, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit:   map[string]hold{"canary-1": {model.ReasonRolloutWaiting, "1 of 2"}},
	}, {
		name: "a commit that changes nothing of dev's counts as done", commit: "c2",
		change: with(fromC1, each(func(m model.RolloutMember) model.RolloutMember {
			m = succeeded(m, "c1")
			m.SkippedCommit = "c2"
			return m
		}, devAll...)),
		state: model.RolloutProgressing, step: 2,
		members: map[string]string{"dev-1": succ, "dev-2": succ, "canary-1": pend, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit:   map[string]hold{"canary-1": {}, "prod-1": {model.ReasonRolloutWaiting, "step 3 of 3 waits for step 2: 0 of 1"}},
	}, {
		name: "dev and canary done: prod moves one at a time", commit: "c2", change: with(fromC1, devDone, each(on("c2"), "canary-1"), each(func(m model.RolloutMember) model.RolloutMember { m.Running = true; return m }, "prod-1")),
		state: model.RolloutProgressing, step: 3,
		members: map[string]string{"dev-1": succ, "dev-2": succ, "canary-1": succ, "prod-1": upd, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit:   map[string]hold{"prod-2": {}, "dev-1": {}},
	}, {
		name: "a canary failure halts prod and holds the failed stack", commit: "c2", change: with(fromC1, devDone, canaryFailed),
		state: model.RolloutHalted, step: 2, haltedBy: []string{"canary-1"}, inMessage: "canary-1 failed",
		members: map[string]string{"dev-1": succ, "dev-2": succ, "canary-1": fail, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit: map[string]hold{"canary-1": {model.ReasonRolloutHalted, "rollout halted at step 2 of 3: canary-1 failed"},
			"prod-4": {model.ReasonRolloutHalted, "canary-1 failed"}, "dev-2": {}},
	}, {
		name: "a sync request to the failed stack resumes", commit: "c2",
		change: with(fromC1, devDone, map[string]func(model.RolloutMember) model.RolloutMember{
			"canary-1": func(m model.RolloutMember) model.RolloutMember { m = failed(m, "c2", "c1"); m.Request = "r2"; return m },
		}),
		state: model.RolloutProgressing, step: 2,
		members: map[string]string{"dev-1": succ, "dev-2": succ, "canary-1": pend, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit:   map[string]hold{"canary-1": {}, "prod-1": {model.ReasonRolloutWaiting, "waits for step 2"}},
	}, {
		name: "an abort holds every stack not done on its target", commit: "c2", change: with(fromC1, devDone, canaryFailed),
		aborted: Aborted{"canary-1": {"c2", 1}, "prod-1": {"c2", 1}, "prod-2": {"c2", 1}, "prod-3": {"c2", 1}, "prod-4": {"c2", 1}},
		state:   model.RolloutAborted, step: 2, inMessage: "aborted at step 2 of 3",
		members: map[string]string{"dev-1": succ, "dev-2": succ, "canary-1": fail, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit: map[string]hold{"canary-1": {model.ReasonRolloutAborted, "rollout aborted at step 2 of 3; stays at its applied commit until a newer revision"},
			"prod-2": {model.ReasonRolloutAborted, "aborted"}},
	}, {
		name: "a newer commit makes the abort stale", commit: "c3", change: with(fromC1, devDone, canaryFailed),
		aborted: Aborted{"canary-1": {"c2", 1}, "prod-1": {"c2", 1}},
		state:   model.RolloutProgressing, step: 1,
		members: map[string]string{"dev-1": pend, "dev-2": pend, "canary-1": wait, "prod-1": wait, "prod-2": wait, "prod-3": wait, "prod-4": wait},
		admit:   map[string]hold{"dev-1": {}, "canary-1": {model.ReasonRolloutWaiting, "waits for step 1"}},
	}, {
		name: "every stack done", commit: "c2", change: each(on("c2"), append(append([]string{"canary-1"}, devAll...), prodAll...)...),
		state: model.RolloutComplete, step: 0, inMessage: "all 7 stacks",
		members: map[string]string{"dev-1": succ, "dev-2": succ, "canary-1": succ, "prod-1": succ, "prod-2": succ, "prod-3": succ, "prod-4": succ},
		admit:   map[string]hold{"prod-1": {}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, members := threeSteps(), fleet(tc.commit, tc.change)
			st := Plan(set, members, tc.aborted)
			if st.State != tc.state || st.Step != tc.step {
				t.Errorf("state %s at step %d (%s), want %s at step %d", st.State, st.Step, st.Message, tc.state, tc.step)
			}
			if got := states(st); !maps.Equal(got, tc.members) {
				t.Errorf("stacks:\n got %v\nwant %v", got, tc.members)
			}
			if !slices.Equal(st.HaltedBy, tc.haltedBy) || !strings.Contains(st.Message, tc.inMessage) {
				t.Errorf("halted by %v, message %q; want %v, %q in it", st.HaltedBy, st.Message, tc.haltedBy, tc.inMessage)
			}
			for name, want := range tc.admit {
				c := New(Options{})
				if tc.aborted != nil {
					c.installLocked(c.stateLocked(set.Name), tc.aborted)
				}
				reason, msg := c.Admit(set, name, members)
				if reason != want.reason || !strings.Contains(msg, want.msg) || (want.msg == "") != (msg == "") {
					t.Errorf("Admit %s: %q %q, want %q with %q", name, reason, msg, want.reason, want.msg)
				}
			}
		})
	}
}

// TestPlanSteps: the steps' selectors, limits, order and each stack's
// target and applied commit.
func TestPlanSteps(t *testing.T) {
	members := fleet("c2", each(on("c1"), "prod-2"))
	st := Plan(threeSteps(), members, nil)
	var sel []string
	var names [][]string
	for _, s := range st.Steps {
		sel = append(sel, s.Selector)
		var n []string
		for _, m := range s.Stacks {
			n = append(n, m.Name)
		}
		names = append(names, n)
	}
	if want := []string{"env=dev", "env in (canary)", "env=prod"}; !slices.Equal(sel, want) {
		t.Errorf("selectors %q, want %q", sel, want)
	}
	if want := [][]string{devAll, {"canary-1"}, prodAll}; !slices.EqualFunc(names, want, slices.Equal) {
		t.Errorf("stacks %q, want %q", names, want)
	}
	if st.Steps[2].MaxUpdate != 1 || st.Steps[0].MaxUpdate != 0 {
		t.Errorf("maxUpdate %d and %d, want 1 and 0", st.Steps[2].MaxUpdate, st.Steps[0].MaxUpdate)
	}
	if got := st.Steps[2].Stacks[1]; got.Commit != "c2" || got.AppliedCommit != "c1" {
		t.Errorf("prod-2: %+v, want target c2 applied c1", got)
	}
}

// TestImplicitLastStep: the stacks no step selects form a last step, of
// the last in order.
func TestImplicitLastStep(t *testing.T) {
	set := threeSteps()
	members := append(fleet("c2", each(on("c2"), append([]string{"canary-1"}, devAll...)...)), member("tools", "", "c2"), member("ops", "qa", "c2"))
	st := Plan(set, members, nil)
	if len(st.Steps) != 4 {
		t.Fatalf("%d steps, want 4", len(st.Steps))
	}
	last := st.Steps[3]
	if last.Selector != "(every other stack)" || len(last.Stacks) != 2 || last.Stacks[0].Name != "ops" || last.MaxUpdate != 0 {
		t.Errorf("last step %+v", last)
	}
	c := New(Options{})
	if reason, msg := c.Admit(set, "tools", members); reason != model.ReasonRolloutWaiting || !strings.Contains(msg, "step 4 of 4 waits for step 3: 0 of 4") {
		t.Errorf("Admit tools: %q %q", reason, msg)
	}
	if reason, _ := c.Admit(set, "prod-1", members); reason != "" {
		t.Errorf("Admit prod-1: %q", reason)
	}
}

// TestNoStrategy: a set without RollingSync holds nothing and takes no
// slot.
func TestNoStrategy(t *testing.T) {
	set := threeSteps()
	set.Spec.Strategy = nil
	slots := &LocalSlots{}
	c := New(Options{Slots: slots})
	members := fleet("c2", map[string]func(model.RolloutMember) model.RolloutMember{
		"dev-1": func(m model.RolloutMember) model.RolloutMember { return failed(m, "c2", "c1") },
	})
	for _, m := range members {
		if reason, msg := c.Admit(set, m.Name, members); reason != "" {
			t.Errorf("Admit %s: %q %q", m.Name, reason, msg)
		}
	}
	st := Plan(set, members, nil)
	if st.State != model.RolloutProgressing || len(st.Steps) != 1 || st.Steps[0].Selector != "(every stack)" {
		t.Errorf("plan %+v", st)
	}
}

// TestFailed names the stacks a resume sends a request to.
func TestFailed(t *testing.T) {
	members := fleet("c2", map[string]func(model.RolloutMember) model.RolloutMember{
		"prod-3":   func(m model.RolloutMember) model.RolloutMember { return failed(m, "c2", "c1") },
		"canary-1": func(m model.RolloutMember) model.RolloutMember { return failed(m, "c2", "c1") },
		"prod-1":   func(m model.RolloutMember) model.RolloutMember { return failed(m, "c1", "c0") }, // an earlier commit
	})
	if got := Failed(members); !slices.Equal(got, []string{"canary-1", "prod-3"}) {
		t.Errorf("Failed: %q", got)
	}
}
