package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// DefaultTimeout bounds one call to the slots or to Meta.
const DefaultTimeout = 5 * time.Second

// reloadAfter is how long a failed read of an abort record is trusted
// before Admit tries again: a store that is down is not asked once per
// stack.
const reloadAfter = time.Second

// Options configure a Controller.
type Options struct {
	// Slots bound the stacks of a step updating at once; a LocalSlots
	// when nil.
	Slots Slots
	// Meta keeps the abort records; in memory when nil.
	Meta Meta
	// OnHalt is called once per new halt of a set's rollout, with the
	// stacks that failed, sorted; a halt is new when the failed stacks
	// or their targets differ from the last halt's. It must not call
	// the Controller.
	OnHalt func(set string, failed []string)
	// Timeout bounds one call to Slots or Meta (DefaultTimeout).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Controller admits the updates of the stacks of StackSets by their
// rollout strategy. It is safe for concurrent use.
type Controller struct {
	opts Options

	mu   sync.Mutex
	sets map[string]*setState
	// held maps a set and stack (holdKey) to the slot key it holds.
	held map[string]string
	// unreleased are slots whose release failed, retried by Refresh.
	unreleased map[[2]string]bool
}

// setState is what the Controller keeps of one set.
type setState struct {
	// set, seen and version identify what plan was computed from.
	set     *spec.StackSet
	seen    []memberKey
	version uint64
	plan    *computed

	aborted Aborted
	// records counts the changes of aborted; loaded says it was read,
	// loadErr why the last read failed, and when.
	records uint64
	loaded  bool
	loadErr error
	loadAt  time.Time
	// halt identifies the last halt notified.
	halt string
}

// New returns a Controller.
func New(opts Options) *Controller {
	if opts.Slots == nil {
		opts.Slots = &LocalSlots{}
	}
	if opts.Meta == nil {
		opts.Meta = &memMeta{}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Controller{opts: opts, sets: map[string]*setState{}, held: map[string]string{}, unreleased: map[[2]string]bool{}}
}

// Failed names the members that failed on their target under their
// current request, sorted: those a resume sends a sync request to.
func Failed(members []model.RolloutMember) []string {
	var out []string
	for i := range members {
		if members[i].Failed() {
			out = append(out, members[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// slotKey names the slots of step k (0-based) of set.
func slotKey(set string, k int) string { return fmt.Sprintf("%s/%d", set, k) }

func holdKey(set, name string) string { return set + "\x00" + name }

// stateLocked is set's state, made when new.
func (c *Controller) stateLocked(set string) *setState {
	s := c.sets[set]
	if s == nil {
		s = &setState{aborted: Aborted{}}
		c.sets[set] = s
	}
	return s
}

// load reads set's abort record unless it was read: once, then on
// Refresh. A failed read is tried again after reloadAfter; its error
// holds the set's members meanwhile.
func (c *Controller) load(set string) error {
	c.mu.Lock()
	s := c.stateLocked(set)
	loaded, err, at := s.loaded, s.loadErr, s.loadAt
	c.mu.Unlock()
	if loaded {
		return nil
	}
	if err != nil && time.Since(at) < reloadAfter {
		return err
	}
	a, err := readAborted(c.opts.Meta, set)
	c.mu.Lock()
	defer c.mu.Unlock()
	s = c.stateLocked(set)
	if s.loaded {
		return nil // read meanwhile
	}
	s.loadErr, s.loadAt = err, time.Now()
	if err == nil {
		c.installLocked(s, a)
	}
	return err
}

// installLocked makes a the records of s.
func (c *Controller) installLocked(s *setState, a Aborted) {
	s.loaded, s.loadErr = true, nil
	if !maps.Equal(s.aborted, a) {
		s.aborted = a
		s.records++
	}
}

// Abort aborts set's rollout: every member not done on its target stays
// at its applied commit while its target is the one it has now. It
// replaces the set's stored record, pruning what can no longer apply.
func (c *Controller) Abort(set *spec.StackSet, members []model.RolloutMember) error {
	prev, err := readAborted(c.opts.Meta, set.Name)
	if err != nil {
		return err
	}
	next := aborting(prev, members)
	if err := writeAborted(c.opts.Meta, set.Name, next); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.installLocked(c.stateLocked(set.Name), next)
	return nil
}

// Resume undoes an abort of set's rollout: it drops the set's records,
// and says whether one of them still held a member. (A halt is resumed
// by sync requests to the failed members: see Failed.)
func (c *Controller) Resume(set *spec.StackSet, members []model.RolloutMember) (bool, error) {
	prev, err := readAborted(c.opts.Meta, set.Name)
	if err != nil {
		return false, err
	}
	held := false
	for i := range members {
		held = held || prev.applies(&members[i])
	}
	if len(prev) == 0 {
		return false, nil
	}
	if err := writeAborted(c.opts.Meta, set.Name, Aborted{}); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.installLocked(c.stateLocked(set.Name), Aborted{})
	return held, nil
}

// Plan is the set's rollout as it stands for members, with the abort
// records the Controller knows (Plan); for the API and the metrics.
func (c *Controller) Plan(set *spec.StackSet, members []model.RolloutMember) model.RolloutStatus {
	_ = c.load(set.Name) // an unreadable record shows as none here; Admit holds meanwhile
	c.mu.Lock()
	aborted := c.stateLocked(set.Name).aborted
	c.mu.Unlock()
	return Plan(set, members, aborted)
}

// Refresh rereads the abort records of the sets the Controller knows
// (another replica may have aborted) and retries the slot releases that
// failed. It prunes nothing: Meta has no compare-and-swap, and a write
// from every replica every few seconds could undo another's abort; the
// next Abort prunes, and a stale record never applies meanwhile.
func (c *Controller) Refresh() error {
	c.mu.Lock()
	sets := slices.Sorted(maps.Keys(c.sets))
	retry := slices.Collect(maps.Keys(c.unreleased))
	c.mu.Unlock()
	var errs []error
	for _, set := range sets {
		a, err := readAborted(c.opts.Meta, set)
		c.mu.Lock()
		if s := c.sets[set]; s != nil && err == nil {
			c.installLocked(s, a)
		} else if s != nil && !s.loaded {
			s.loadErr, s.loadAt = err, time.Now()
		}
		c.mu.Unlock()
		errs = append(errs, err)
	}
	for _, r := range retry {
		c.release(r[0], r[1])
	}
	return errors.Join(errs...)
}

// Snapshot is the last plan computed of each set, by set name.
func (c *Controller) Snapshot() []model.RolloutStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []model.RolloutStatus
	for _, s := range c.sets {
		if s.plan != nil {
			out = append(out, cloneStatus(s.plan.status))
		}
	}
	slices.SortFunc(out, func(a, b model.RolloutStatus) int { return cmp.Compare(a.Set, b.Set) })
	return out
}

// Forget drops what the Controller keeps of a set that is gone, but the
// slots its stacks hold: Done still gives them back.
func (c *Controller) Forget(set string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sets, set)
}

func cloneStatus(s model.RolloutStatus) model.RolloutStatus {
	s.HaltedBy = slices.Clone(s.HaltedBy)
	s.Steps = slices.Clone(s.Steps)
	for i := range s.Steps {
		s.Steps[i].Stacks = slices.Clone(s.Steps[i].Stacks)
	}
	return s
}

// ctx bounds one call to the slots or Meta.
func (c *Controller) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.opts.Timeout)
}
