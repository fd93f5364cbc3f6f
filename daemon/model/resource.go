package model

import (
	"strings"
	"time"
)

// Types of the resources that every stack has beside its program's.
const (
	// StackType is the type of a stack's root resource.
	StackType = "pulumi:pulumi:Stack"
	// ProviderTypePrefix begins the type of every provider resource.
	ProviderTypePrefix = "pulumi:providers:"
)

// ProgramResource says whether a resource of type typ is one of the
// program's own: not the stack's root, not a provider. These are what
// stackd counts and checks: the changes of a plan, drift.
func ProgramResource(typ string) bool {
	return typ != StackType && !strings.HasPrefix(typ, ProviderTypePrefix)
}

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
