package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Target is what a stack would deploy: a commit of a generation of its
// spec.
type Target struct {
	Commit     string `json:"commit"`
	Generation int64  `json:"generation"`
}

// targetOf is m's target.
func targetOf(m *model.RolloutMember) Target { return Target{m.Commit, m.Generation} }

// Aborted maps the stacks of an aborted rollout to the target each had
// when it was aborted. A record holds its stack while the stack's target
// is the one recorded; a newer revision makes it stale.
type Aborted map[string]Target

// applies says whether m is held by an abort record.
func (a Aborted) applies(m *model.RolloutMember) bool {
	t, ok := a[m.Name]
	return ok && m.Commit != "" && t == targetOf(m)
}

// everyOther is the selector shown for the implicit last step.
const everyOther = "(every other stack)"

// step is one step of a rollout as computed.
type step struct {
	selector   string
	raw        string // maxUpdate as written, for messages
	max        int
	members    []int // indexes into the members, sorted by name
	done, runs int
}

// placement is where one member stands: its step (0-based) and, when the
// rollout itself holds it, why.
type placement struct {
	step, index int // index into the members
	reason, msg string
}

// computed is a rollout's plan with what Admit needs of it.
type computed struct {
	status model.RolloutStatus
	steps  []step
	at     map[string]placement
	// halt identifies the halt (the failed stacks and their targets);
	// empty when not halted.
	halt string
}

// rolling says whether set has a RollingSync strategy: without one, its
// stacks all update at once.
func rolling(set *spec.StackSet) bool {
	s := set.Spec.Strategy
	return s != nil && s.Type == "RollingSync" && s.RollingSync != nil
}

// Plan is where set's rollout stands for its members and abort records
// (nil for none). It is pure. Each member belongs to the first step
// whose selector selects its labels; the members no step selects form an
// implicit last step. A set without a RollingSync strategy has one step
// of all its stacks and holds none.
func Plan(set *spec.StackSet, members []model.RolloutMember, aborted Aborted) model.RolloutStatus {
	return compute(set, members, aborted).status
}

// compute is Plan, with each member's placement.
func compute(set *spec.StackSet, members []model.RolloutMember, aborted Aborted) *computed {
	c := &computed{steps: assign(set, members), at: make(map[string]placement, len(members))}
	c.status = model.RolloutStatus{Set: set.Name, Steps: make([]model.RolloutStepStatus, len(c.steps))}
	var failed []int
	for k := range c.steps {
		s := &c.steps[k]
		for _, i := range s.members {
			m := &members[i]
			if m.Done() {
				s.done++
			} else if m.Running {
				s.runs++
			}
			if m.Failed() {
				failed = append(failed, i)
			}
		}
	}
	slices.SortFunc(failed, func(a, b int) int { return cmp.Compare(members[a].Name, members[b].Name) })
	c.status.Step = firstIncomplete(c.steps) + 1
	c.state(set, members, failed, aborted)
	for k := range c.steps {
		c.status.Steps[k] = c.stepStatus(k, members, rolling(set))
	}
	return c
}

// assign places the members in steps, each step's members sorted by name.
func assign(set *spec.StackSet, members []model.RolloutMember) []step {
	var cfg []spec.RolloutStep
	if rolling(set) {
		cfg = set.Spec.Strategy.RollingSync.Steps
	}
	steps := make([]step, len(cfg), len(cfg)+1)
	for k := range cfg {
		steps[k] = step{selector: selectorString(cfg[k]), raw: cfg[k].MaxUpdate}
	}
	var rest []int
	for i := range members {
		k := slices.IndexFunc(cfg, func(s spec.RolloutStep) bool { return s.Selects(members[i].Labels) })
		if k < 0 {
			rest = append(rest, i)
		} else {
			steps[k].members = append(steps[k].members, i)
		}
	}
	if len(rest) > 0 {
		sel := everyOther
		if len(cfg) == 0 {
			sel = "(every stack)"
		}
		steps = append(steps, step{selector: sel, members: rest})
	}
	for k := range steps {
		s := &steps[k]
		slices.SortFunc(s.members, func(a, b int) int { return cmp.Compare(members[a].Name, members[b].Name) })
		if k < len(cfg) {
			s.max = cfg[k].Limit(len(s.members))
		}
	}
	return steps
}

// firstIncomplete is the index of the first step with a member not done;
// -1 when every step is complete.
func firstIncomplete(steps []step) int {
	return slices.IndexFunc(steps, func(s step) bool { return s.done < len(s.members) })
}

// state sets the rollout's state and message and each member's
// placement: an abort record that applies holds first, then a halt, then
// an earlier step not complete.
func (c *computed) state(set *spec.StackSet, members []model.RolloutMember, failed []int, aborted Aborted) {
	n, st := len(c.steps), &c.status
	hold := rolling(set)
	var isAborted bool
	halted, abortMsg := "", abortedMsg(st.Step, n)
	if len(failed) > 0 {
		halted = haltedMsg(members, failed, st.Step, n)
	}
	for k, s := range c.steps {
		for _, i := range s.members {
			m := &members[i]
			p := placement{step: k, index: i}
			switch {
			case m.Done() || !hold:
			case aborted.applies(m):
				isAborted = true
				p.reason, p.msg = model.ReasonRolloutAborted, abortMsg
			case len(failed) > 0:
				p.reason, p.msg = model.ReasonRolloutHalted, halted
			case st.Step-1 < k:
				j := st.Step - 1
				p.reason = model.ReasonRolloutWaiting
				p.msg = fmt.Sprintf("step %d of %d waits for step %d: %d of %d stacks succeeded on their target",
					k+1, n, j+1, c.steps[j].done, len(c.steps[j].members))
			}
			c.at[m.Name] = p
		}
	}
	switch {
	case st.Step == 0:
		st.State, st.Message = model.RolloutComplete, fmt.Sprintf("all %d stacks succeeded on their target", len(members))
	case isAborted:
		st.State = model.RolloutAborted
		st.Message = fmt.Sprintf("rollout aborted at step %d of %d; its stacks stay at their applied commit until a newer revision", st.Step, n)
	case hold && len(failed) > 0:
		st.State, st.Message = model.RolloutHalted, halted
		for _, i := range failed {
			st.HaltedBy = append(st.HaltedBy, members[i].Name)
			t := targetOf(&members[i])
			c.halt += fmt.Sprintf("%s@%s/%d;", members[i].Name, t.Commit, t.Generation)
		}
	default:
		s := c.steps[st.Step-1]
		st.State = model.RolloutProgressing
		st.Message = fmt.Sprintf("step %d of %d: %d of %d stacks succeeded on their target", st.Step, n, s.done, len(s.members))
	}
}

func abortedMsg(step, n int) string {
	return fmt.Sprintf("rollout aborted at step %d of %d; stays at its applied commit until a newer revision", step, n)
}

// haltedMsg names the failed stacks, the first few of them.
func haltedMsg(members []model.RolloutMember, failed []int, step, n int) string {
	const shown = 5
	var names []string
	for _, i := range failed[:min(len(failed), shown)] {
		names = append(names, members[i].Name)
	}
	list := strings.Join(names, ", ")
	if len(failed) > shown {
		list += fmt.Sprintf(" and %d more", len(failed)-shown)
	}
	its := "its"
	if len(failed) > 1 {
		its = "their"
	}
	return fmt.Sprintf("rollout halted at step %d of %d: %s failed on %s target; sync the failed stacks to resume, or abort", step, n, list, its)
}

// stepStatus is step k as the API shows it. Without slots to ask, a
// member of a step whose maxUpdate stacks run is shown Waiting.
func (c *computed) stepStatus(k int, members []model.RolloutMember, hold bool) model.RolloutStepStatus {
	s := c.steps[k]
	out := model.RolloutStepStatus{Selector: s.selector, MaxUpdate: s.max, Stacks: make([]model.RolloutStack, 0, len(s.members))}
	full := hold && s.max > 0 && s.runs >= s.max
	for _, i := range s.members {
		m := &members[i]
		rs := model.RolloutStack{Name: m.Name, Commit: m.Commit, State: model.MemberPending}
		if m.Last != nil {
			rs.AppliedCommit = m.Last.LastSuccessfulCommit
		}
		switch {
		case m.Done():
			rs.State = model.MemberSucceeded
		case m.Failed():
			rs.State = model.MemberFailed
		case m.Running:
			rs.State = model.MemberUpdating
		case c.at[m.Name].reason != "" || full:
			rs.State = model.MemberWaiting
		}
		out.Stacks = append(out.Stacks, rs)
	}
	return out
}

// selectorString shows a step's selector as kubectl does; "(every
// stack)" for an empty one.
func selectorString(step spec.RolloutStep) string {
	if s := step.String(); s != "" {
		return s
	}
	return "(every stack)"
}
