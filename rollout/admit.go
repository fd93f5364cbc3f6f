package rollout

import (
	"fmt"
	"reflect"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// memberKey is what a plan depends on of one member. Admit compares the
// members it is given with those its cached plan was computed from, in
// O(n) with small constants, rather than computing the plan again: the
// daemon asks once per member, with every member each time.
type memberKey struct {
	name, commit, applied string
	gen                   int64
	// labels identifies the labels map: a member's labels are a new map
	// when they change, never the same map changed.
	labels                uintptr
	nlabels               int
	done, failed, running bool
}

func keyOf(m *model.RolloutMember) memberKey {
	k := memberKey{name: m.Name, commit: m.Commit, gen: m.Generation, nlabels: len(m.Labels),
		done: m.Done(), failed: m.Failed(), running: m.Running}
	if m.Labels != nil {
		k.labels = uintptr(reflect.ValueOf(m.Labels).UnsafePointer())
	}
	if m.Last != nil {
		k.applied = m.Last.LastSuccessfulCommit
	}
	return k
}

// same says whether members are those seen.
func same(seen []memberKey, members []model.RolloutMember) bool {
	if len(seen) != len(members) {
		return false
	}
	for i := range members {
		if seen[i] != keyOf(&members[i]) {
			return false
		}
	}
	return true
}

// Admit says why member name of set may not start an update now ("" when
// it may), given every member of the set as this replica sees it. A
// member admitted in a step with a maxUpdate holds a slot of the step
// until Done. A set without a RollingSync strategy admits every member,
// and so does any set a member that is done on its target (a resync
// moves nothing). An error of the slots or of the abort records holds
// the member. members are read, not kept, and may be the same slice
// from call to call: the plan is computed again when a member changed,
// but a member's Labels must be a new map when they change, never the
// same map changed in place.
func (c *Controller) Admit(set *spec.StackSet, name string, members []model.RolloutMember) (reason, msg string) {
	if !rolling(set) {
		return "", ""
	}
	if err := c.load(set.Name); err != nil {
		if i := indexOf(members, name); i >= 0 && members[i].Done() {
			return "", ""
		}
		return model.ReasonRolloutWaiting, "cannot tell whether the rollout was aborted: " + err.Error()
	}
	p, k, max, raw, reason, msg, ok := c.place(set, name, members)
	if !ok || reason != "" || max == 0 {
		return reason, msg
	}
	return c.acquire(set.Name, name, p, k, max, raw)
}

// place is name's placement in set's plan, and its step's number of
// steps, maxUpdate and maxUpdate as written. ok is false when the member
// need not be held nor take a slot (reason then says why it is held, if
// it is).
func (c *Controller) place(set *spec.StackSet, name string, members []model.RolloutMember) (p placement, n, max int, raw, reason, msg string, ok bool) {
	c.mu.Lock()
	plan, notify := c.planLocked(set, members)
	p, found := plan.at[name]
	c.mu.Unlock()
	if notify != nil {
		notify()
	}
	switch {
	case !found:
		return p, 0, 0, "", model.ReasonRolloutWaiting, fmt.Sprintf("%s is not a stack of StackSet %s", name, set.Name), false
	case members[p.index].Done():
		return p, 0, 0, "", "", "", false
	case p.reason != "":
		return p, 0, 0, "", p.reason, p.msg, false
	}
	s := plan.steps[p.step]
	return p, len(plan.steps), s.max, s.raw, "", "", true
}

// planLocked is set's plan for members, the cached one when neither they,
// the set nor its abort records changed. A new plan that halts anew
// returns the OnHalt call to make once the lock is released.
func (c *Controller) planLocked(set *spec.StackSet, members []model.RolloutMember) (*computed, func()) {
	s := c.stateLocked(set.Name)
	if s.plan != nil && s.set == set && s.version == s.records && same(s.seen, members) {
		return s.plan, nil
	}
	s.plan = compute(set, members, s.aborted)
	s.set, s.version = set, s.records
	s.seen = s.seen[:0]
	for i := range members {
		s.seen = append(s.seen, keyOf(&members[i]))
	}
	var notify func()
	if h := s.plan.halt; h != s.halt {
		s.halt = h
		if on := c.opts.OnHalt; on != nil && h != "" {
			failed := append([]string(nil), s.plan.status.HaltedBy...)
			notify = func() { on(set.Name, failed) }
		}
	}
	return s.plan, notify
}

// acquire takes a slot of step p.step for name: name is admitted if it
// holds one.
func (c *Controller) acquire(set, name string, p placement, n, max int, raw string) (reason, msg string) {
	key := slotKey(set, p.step)
	ctx, cancel := c.ctx()
	defer cancel()
	got, err := c.opts.Slots.TryAcquire(ctx, key, name, max)
	switch {
	case err != nil:
		return model.ReasonRolloutWaiting, fmt.Sprintf("step %d of %d: cannot take a slot (maxUpdate %s): %v", p.step+1, n, raw, err)
	case !got:
		return model.ReasonRolloutWaiting, fmt.Sprintf("step %d of %d: %d of %d updating (maxUpdate %s)", p.step+1, n, max, max, raw)
	}
	c.mu.Lock()
	old := c.held[holdKey(set, name)]
	c.held[holdKey(set, name)] = key
	c.mu.Unlock()
	if old != "" && old != key {
		c.release(old, name) // its step changed since it took that one
	}
	return "", ""
}

// Done gives back the slot member name of set took when admitted, if it
// took one. A release that fails is retried by Refresh; until then, the
// slot counts.
func (c *Controller) Done(set *spec.StackSet, name string) {
	c.mu.Lock()
	key, ok := c.held[holdKey(set.Name, name)]
	delete(c.held, holdKey(set.Name, name))
	c.mu.Unlock()
	if ok {
		c.release(key, name)
	}
}

// release releases a slot, or keeps it to be retried.
func (c *Controller) release(key, holder string) {
	ctx, cancel := c.ctx()
	defer cancel()
	err := c.opts.Slots.Release(ctx, key, holder)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.opts.Logger.Warn("cannot release a rollout slot; retrying", "slot", key, "stack", holder, "err", err)
		c.unreleased[[2]string{key, holder}] = true
		return
	}
	delete(c.unreleased, [2]string{key, holder})
}

func indexOf(members []model.RolloutMember, name string) int {
	for i := range members {
		if members[i].Name == name {
			return i
		}
	}
	return -1
}
