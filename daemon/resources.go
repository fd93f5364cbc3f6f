package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Resource is one resource of a stack's state, as the runner exported it:
// what it is and where it sits in the tree, never its property values (so
// nothing secret).
type Resource struct {
	URN  string `json:"urn"`
	Type string `json:"type"`
	Name string `json:"name"`
	// ID is the provider's ID of a custom resource.
	ID string `json:"id,omitempty"`
	// Parent is the URN of the resource's parent (a component or the
	// stack); empty for the stack itself.
	Parent string `json:"parent,omitempty"`
	// Provider is the URN of the provider resource that manages it.
	Provider       string `json:"provider,omitempty"`
	Custom         bool   `json:"custom,omitempty"`
	Protect        bool   `json:"protect,omitempty"`
	RetainOnDelete bool   `json:"retainOnDelete,omitempty"`
	External       bool   `json:"external,omitempty"`
	// Created and Modified are the state's own times (zero when the
	// state is older than Pulumi's recording of them).
	Created  time.Time `json:"created,omitzero"`
	Modified time.Time `json:"modified,omitzero"`
	// ChangedBy is the update that last created or changed the resource,
	// as far as stackd saw it; empty when that was before its record.
	ChangedBy string `json:"changedBy,omitempty"`
	// Drift is the resource's status from the last drift check (one of
	// the ResourceDrift values), and DriftProperties the properties that
	// differ. Filled in when read, from the stack's drift status.
	Drift           string   `json:"drift,omitempty"`
	DriftProperties []string `json:"driftProperties,omitempty"`
}

// Drift states of one resource. A resource that the last drift check did
// not see (none ran, it failed, or the resource is newer) has none.
const (
	ResourceInSync  = "in-sync"
	ResourceDrifted = "drifted"
	ResourceDeleted = "deleted"
)

// Resources is a stack's resources as of an update.
type Resources struct {
	// Update is the update after which the state was exported, and Time
	// when.
	Update string    `json:"update"`
	Time   time.Time `json:"time"`
	// DriftCheck is the drift check whose statuses the resources carry
	// (filled in when read); empty before any.
	DriftCheck string     `json:"driftCheck,omitempty"`
	Resources  []Resource `json:"resources"`
}

// ResourceStore keeps the last Resources of each stack; the BoltDB and
// the etcd stores implement it as part of Store. DeleteStack deletes them.
type ResourceStore interface {
	PutResources(stack string, r Resources) error
	// Resources reads them; the error wraps ErrNotFound when there are
	// none.
	Resources(stack string) (Resources, error)
}

// exportsState says whether an operation of type typ changes (or checks)
// the state, so that the runner exports it afterwards.
func exportsState(typ string) bool {
	switch typ {
	case UpdateUp, UpdateRefresh, UpdateDestroy, UpdateDrift:
		return true
	}
	return false
}

// attribute sets each resource's ChangedBy: update when the state says
// the resource was created or modified since start (the update's start),
// else what prev said of the same URN.
func attribute(cur []Resource, prev []Resource, update string, start time.Time) {
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
func markDrift(rs []Resource, drift *spec.DriftStatus) {
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
			r.Drift, r.DriftProperties = ResourceDrifted, d.Properties
			if d.Op == "delete" {
				r.Drift = ResourceDeleted
			}
			continue
		}
		if r.Created.After(drift.LastCheck) || r.Modified.After(drift.LastCheck) {
			continue
		}
		r.Drift = ResourceInSync
	}
}

// recordResources stores the resources the runner exported after update
// u, attributing changes to it. Called without d.mu held.
func (d *Daemon) recordResources(u Update, exported []Resource) {
	prev, err := d.opts.Store.Resources(u.Stack)
	if err != nil && !errors.Is(err, ErrNotFound) {
		d.log.Warn("cannot read the stack's resources", "stack", u.Stack, "err", err)
	}
	for i := range exported { // an ID may echo a value the daemon keeps secret
		exported[i].ID = d.red.Clean(exported[i].ID)
	}
	attribute(exported, prev.Resources, u.ID, u.StartTime)
	r := Resources{Update: u.ID, Time: u.EndTime, Resources: exported}
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
	m   map[string]Resources
}

// get returns stack's snapshot; ok is false when it is not cached.
func (c *resourceCache) get(stack string) (Resources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[stack]
	return r, ok
}

// put caches r as stack's snapshot when stored, else forgets stack's.
func (c *resourceCache) put(stack string, r Resources, stored bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.off:
	case !stored:
		delete(c.m, stack)
	default:
		if c.m == nil {
			c.m = map[string]Resources{}
		}
		c.m[stack] = r
	}
}

// forget drops stack's snapshot (its record was deleted).
func (c *resourceCache) forget(stack string) { c.put(stack, Resources{}, false) }

// StackResources returns the named stack's resources as of its last
// exported state, with each one's drift status from the last drift
// check. A stack without any yet has none (no error).
func (d *Daemon) StackResources(name string) (Resources, error) {
	d.mu.Lock()
	st := d.stacks[name]
	var drift *spec.DriftStatus
	if st != nil {
		drift = st.rec.Status.Drift.Clone()
	}
	d.mu.Unlock()
	if st == nil {
		return Resources{}, ErrUnknownStack
	}
	r, ok := d.resources.get(name)
	if !ok {
		var err error
		r, err = d.opts.Store.Resources(name)
		if errors.Is(err, ErrNotFound) {
			return Resources{Resources: []Resource{}}, nil
		}
		if err != nil {
			return Resources{}, fmt.Errorf("stack %s: resources: %w", name, err)
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
