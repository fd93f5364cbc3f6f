package spec

import "time"

// Drift states.
const (
	DriftInSync      = "InSync"
	DriftDrifted     = "Drifted"
	DriftCheckFailed = "CheckFailed"
	DriftUnknown     = "Unknown"
)

// DriftStatus is the outcome of a stack's last drift check.
type DriftStatus struct {
	State     string    `json:"state"`
	LastCheck time.Time `json:"lastCheck,omitzero"`
	// Since is when the stack was first seen drifted, while it is.
	Since time.Time `json:"since,omitzero"`
	// Resources are the drifted resources, ignored ones left out.
	Resources []DriftedResource `json:"resources,omitempty"`
	// Ignored counts drifted resources that ignore rules accept.
	Ignored int `json:"ignored,omitempty"`
	// Check is the id of the check's update; Message its error.
	Check   string `json:"check,omitempty"`
	Message string `json:"message,omitempty"`
}

// DriftedResource is a resource that changed outside Pulumi. It names the
// properties that differ, never their values.
type DriftedResource struct {
	URN  string `json:"urn"`
	Type string `json:"type"`
	// Op is what a refresh would do: "update" (changed) or "delete" (gone).
	Op         string   `json:"op"`
	Properties []string `json:"properties,omitempty"`
}

// Clone returns a deep copy of d; nil for nil.
func (d *DriftStatus) Clone() *DriftStatus {
	if d == nil {
		return nil
	}
	c := *d
	c.Resources = nil
	for _, r := range d.Resources {
		r.Properties = append([]string(nil), r.Properties...)
		c.Resources = append(c.Resources, r)
	}
	return &c
}
