package daemon

import (
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Rollouts orders the updates of the stacks a StackSet generates
// (rollout.Controller implements it).
type Rollouts interface {
	// Admit says why stack name of set may not start an update now (an
	// empty reason: it may), given every stack of the set as this replica
	// sees it. When it may, it took a slot of the stack's step: Done gives
	// it back once the operation ends.
	Admit(set *spec.StackSet, name string, members []model.RolloutMember) (reason, msg string)
	Done(set *spec.StackSet, name string)
}

// admit asks the rollout of st's set, if any, whether st may start an
// operation of type typ now. Removals are not held: they follow the
// removal rules.
func (d locked) admit(st *stackState, typ string) (string, string) {
	set := d.setOf(st.stack)
	if set == nil || d.opts.Rollouts == nil || typ == model.UpdateDestroy {
		return "", ""
	}
	reason, msg := d.opts.Rollouts.Admit(set, st.rec.Name, d.members(set))
	if reason == "" {
		st.rollout = set
	} else if st.remediate != "" {
		msg += "; the drift remediation waits with it"
	}
	return reason, msg
}

// rolloutDone gives back the step slot st's operation took.
func (d locked) rolloutDone(st *stackState) {
	if st.rollout != nil {
		d.opts.Rollouts.Done(st.rollout, st.rec.Name)
		st.rollout = nil
	}
}

// setOf is the StackSet that generated s, or nil.
func (d locked) setOf(s *spec.Stack) *spec.StackSet {
	if s == nil || s.Owner == "" || d.cfg == nil {
		return nil
	}
	for _, set := range d.cfg.StackSets {
		if set.Owner() == s.Owner {
			return set
		}
	}
	return nil
}

// members is what the rollout of set knows of its stacks, built once a
// pass. A stack's target commit is the newest this replica saw on its
// branch, whoever holds the stack: a stack of an earlier step is judged
// on the commit a later one wants, never on one its holder saw earlier.
func (d locked) members(set *spec.StackSet) []model.RolloutMember {
	if ms, ok := d.setMembers[set.Name]; ok {
		return ms
	}
	heads := map[string]*stackState{}
	for _, st := range d.stacks {
		if k := branchKey(st); k != "" && st.commit != "" && d.acts(st) && (heads[k] == nil || st.commitSeen.After(heads[k].commitSeen)) {
			heads[k] = st
		}
	}
	var ms []model.RolloutMember
	for _, st := range d.stacks {
		if st.stack == nil || st.stack.Owner != set.Owner() {
			continue
		}
		m := model.RolloutMember{Name: st.rec.Name, Labels: st.stack.Labels, Commit: d.commitOf(st), Generation: st.rec.Generation,
			Request: d.request(st), Last: st.rec.Status.LastUpdate, Running: st.act.Running() || busyElsewhere(st)}
		if h := heads[branchKey(st)]; h != nil {
			m.Commit = h.commit
		}
		if sc := st.rec.Status.SkippedCommit; sc != nil {
			m.SkippedCommit = sc.Commit
		}
		ms = append(ms, m)
	}
	d.setMembers[set.Name] = ms
	return ms
}

// branchKey names the branch st tracks; empty when it tracks none.
func branchKey(st *stackState) string {
	if !tracksBranch(st) {
		return ""
	}
	return spec.RepoKey(st.stack.Spec.ProjectRepo) + "#" + st.stack.Spec.Branch
}

// StackSets returns the StackSets of the config in force and, by set,
// what their rollouts know of their stacks.
func (d *Daemon) StackSets() ([]*spec.StackSet, map[string][]model.RolloutMember) {
	l := d.lock()
	defer l.unlock()
	if l.cfg == nil {
		return nil, nil
	}
	clear(l.setMembers)
	out := map[string][]model.RolloutMember{}
	for _, set := range l.cfg.StackSets {
		out[set.Name] = l.members(set)
	}
	return l.cfg.StackSets, out
}
