package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/model"
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

// attribute sets each resource's ChangedBy: update when the state says
// the resource was created or modified since start (the update's start),
// else what prev said of the same URN.
func attribute(cur []model.Resource, prev []model.Resource, update string, start time.Time) {
	was := make(map[string]string, len(prev))
	for _, r := range prev {
		was[r.URN] = r.ChangedBy
	}
	for i := range cur {
		r := &cur[i]
		switch {
		case !r.Modified.Before(start) && !r.Modified.IsZero(), !r.Created.Before(start) && !r.Created.IsZero():
			r.ChangedBy = update
		default:
			r.ChangedBy = was[r.URN]
		}
	}
}

// markDrift fills in each resource's drift status from the stack's last
// drift check: those it found changed or gone are drifted or deleted,
// the others it saw (not newer than the check) in sync; the stack and
// providers, which it does not look at, have none. Nothing is marked
// without a check that succeeded.
func markDrift(rs []model.Resource, drift *spec.DriftStatus) {
	if drift == nil || (drift.State != spec.DriftInSync && drift.State != spec.DriftDrifted) {
		return
	}
	found := make(map[string]spec.DriftedResource, len(drift.Resources))
	for _, d := range drift.Resources {
		found[d.URN] = d
	}
	for i := range rs {
		r := &rs[i]
		if r.Type == "pulumi:pulumi:Stack" || strings.HasPrefix(r.Type, "pulumi:providers:") {
			continue // a drift check looks at neither
		}
		if d, ok := found[r.URN]; ok {
			r.Drift, r.DriftProperties = model.ResourceDrifted, d.Properties
			if d.Op == "delete" {
				r.Drift = model.ResourceDeleted
			}
			continue
		}
		if r.Created.After(drift.LastCheck) || r.Modified.After(drift.LastCheck) {
			continue
		}
		r.Drift = model.ResourceInSync
	}
}

// recordResources stores the resources the runner exported after update
// u, attributing changes to it. Called without d.mu held.
func (d *Daemon) recordResources(u model.Update, exported []model.Resource) {
	prev, err := d.opts.Store.Resources(u.Stack)
	if err != nil && !errors.Is(err, ErrNotFound) {
		d.log.Warn("cannot read the stack's resources", "stack", u.Stack, "err", err)
	}
	for i := range exported { // an ID may echo a value the daemon keeps secret
		exported[i].ID = d.red.Clean(exported[i].ID)
	}
	attribute(exported, prev.Resources, u.ID, u.StartTime)
	r := model.Resources{Update: u.ID, Time: u.EndTime, Resources: exported}
	err = d.opts.Store.PutResources(u.Stack, r)
	if err != nil {
		d.storeError("cannot record the stack's resources", u.Stack, err, "update", u.ID)
	}
	d.resources.put(u.Stack, r, err == nil)
}

// resourceCache keeps each stack's last Resources as this replica wrote
// them, so that a page view decodes nothing: a snapshot changes once per
// update. A cluster's replicas read the store, which another replica
// may have written.
type resourceCache struct {
	mu  sync.Mutex
	off bool
	m   map[string]model.Resources
}

// get returns stack's snapshot; ok is false when it is not cached.
func (c *resourceCache) get(stack string) (model.Resources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[stack]
	return r, ok
}

// put caches r as stack's snapshot when stored, else forgets stack's.
func (c *resourceCache) put(stack string, r model.Resources, stored bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.off:
	case !stored:
		delete(c.m, stack)
	default:
		if c.m == nil {
			c.m = map[string]model.Resources{}
		}
		c.m[stack] = r
	}
}

// forget drops stack's snapshot (its record was deleted).
func (c *resourceCache) forget(stack string) { c.put(stack, model.Resources{}, false) }

// StackResources returns the named stack's resources as of its last
// exported state, with each one's drift status from the last drift
// check. A stack without any yet has none (no error).
func (d *Daemon) StackResources(name string) (model.Resources, error) {
	d.mu.Lock()
	st := d.stacks[name]
	var drift *spec.DriftStatus
	if st != nil {
		drift = st.rec.Status.Drift.Clone()
	}
	d.mu.Unlock()
	if st == nil {
		return model.Resources{}, ErrUnknownStack
	}
	r, ok := d.resources.get(name)
	if !ok {
		var err error
		r, err = d.opts.Store.Resources(name)
		if errors.Is(err, ErrNotFound) {
			return model.Resources{Resources: []model.Resource{}}, nil
		}
		if err != nil {
			return model.Resources{}, fmt.Errorf("stack %s: resources: %w", name, err)
		}
		d.resources.put(name, r, true)
	}
	r.Resources = slices.Clone(r.Resources) // the cache's stay unmarked
	markDrift(r.Resources, drift)
	if drift != nil {
		r.DriftCheck = drift.Check
	}
	return r, nil
}
