package daemon

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resource"
	"github.com/stackd/stackd/daemon/spec"
)

// ResourceStore keeps the last Resources of each stack; the BoltDB and
// the etcd stores implement it as part of Store. DeleteStack deletes them.
type ResourceStore interface {
	PutResources(stack string, r model.Resources) error
	// Resources reads them; the error wraps ErrNotFound when there are
	// none.
	Resources(stack string) (model.Resources, error)
}

// exportsState says whether an operation of type typ changes (or checks)
// the state, so that the runner exports it afterwards.
func exportsState(typ string) bool {
	switch typ {
	case model.UpdateUp, model.UpdateRefresh, model.UpdateDestroy, model.UpdateDrift:
		return true
	}
	return false
}

// recordResources stores the resources the runner exported after update
// u, attributing changes to it. Called without d.mu held.
func (d *Daemon) recordResources(u model.Update, exported []model.Resource) {
	prev, err := d.opts.Store.Resources(u.Stack)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		d.log.Warn("cannot read the stack's resources", "stack", u.Stack, "err", err)
	}
	for i := range exported { // an ID may echo a value the daemon keeps secret
		exported[i].ID = d.red.Clean(exported[i].ID)
	}
	resource.Attribute(exported, prev.Resources, u.ID, u.StartTime)
	r := model.Resources{Update: u.ID, Time: u.EndTime, Resources: exported}
	err = d.opts.Store.PutResources(u.Stack, r)
	if err != nil {
		d.storeError("cannot record the stack's resources", u.Stack, err, "update", u.ID)
	}
	d.resources.Put(u.Stack, r, err == nil)
}

// StackResources returns the named stack's resources as of its last
// exported state, with each one's drift status from the last drift
// check. A stack without any yet has none (no error).
func (d *Daemon) StackResources(name string) (model.Resources, error) {
	l := d.lock()
	st := l.stacks[name]
	var drift *spec.DriftStatus
	if st != nil {
		drift = st.rec.Status.Drift.Clone()
	}
	l.unlock()
	if st == nil {
		return model.Resources{}, ErrUnknownStack
	}
	r, ok := d.resources.Get(name)
	if !ok {
		var err error
		r, err = d.opts.Store.Resources(name)
		if errors.Is(err, model.ErrNotFound) {
			return model.Resources{Resources: []model.Resource{}}, nil
		}
		if err != nil {
			return model.Resources{}, fmt.Errorf("stack %s: resources: %w", name, err)
		}
		d.resources.Put(name, r, true)
	}
	r.Resources = slices.Clone(r.Resources) // the cache's stay unmarked
	resource.MarkDrift(r.Resources, drift)
	if drift != nil {
		r.DriftCheck = drift.Check
	}
	return r, nil
}
