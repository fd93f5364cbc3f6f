package resource

import (
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Attribute sets each resource's ChangedBy: update when the state says
// the resource was created or modified since start (the update's start),
// else what prev said of the same URN.
func Attribute(cur []model.Resource, prev []model.Resource, update string, start time.Time) {
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

// MarkDrift fills in each resource's drift status from the stack's last
// drift check: those it found changed or gone are drifted or deleted,
// the others it saw (not newer than the check) in sync; the stack and
// providers, which it does not look at, have none. Nothing is marked
// without a check that succeeded.
func MarkDrift(rs []model.Resource, drift *spec.DriftStatus) {
	if drift == nil || (drift.State != spec.DriftInSync && drift.State != spec.DriftDrifted) {
		return
	}
	found := make(map[string]spec.DriftedResource, len(drift.Resources))
	for _, d := range drift.Resources {
		found[d.URN] = d
	}
	for i := range rs {
		r := &rs[i]
		if !model.ProgramResource(r.Type) {
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

// Cache keeps each stack's last Resources as this replica wrote
// them, so that a page view decodes nothing: a snapshot changes once per
// update. A cluster's replicas read the store, which another replica
// may have written.
type Cache struct {
	mu sync.Mutex
	// Off turns the cache off: a cluster's replicas read the store.
	Off bool
	m   map[string]model.Resources
}

// Get returns stack's snapshot; ok is false when it is not cached.
func (c *Cache) Get(stack string) (model.Resources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[stack]
	return r, ok
}

// Put caches r as stack's snapshot when stored, else forgets stack's.
func (c *Cache) Put(stack string, r model.Resources, stored bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.Off:
	case !stored:
		delete(c.m, stack)
	default:
		if c.m == nil {
			c.m = map[string]model.Resources{}
		}
		c.m[stack] = r
	}
}

// Forget drops stack's snapshot (its record was deleted).
func (c *Cache) Forget(stack string) { c.Put(stack, model.Resources{}, false) }
