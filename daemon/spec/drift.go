package spec

import (
	"slices"
	"strings"
	"time"
)

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
	// Check is the id of the check's update; Message its error. Once an
	// up that refreshed first healed the drift, Check is that up's id and
	// Message says so.
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

// FilterDrift applies ignore rules: a rule without properties accepts a
// matching resource's drift; a rule with properties accepts those
// properties only. It returns what stays drifted and how many resources
// the rules accepted.
func FilterDrift(drift []DriftedResource, rules []DriftIgnore) ([]DriftedResource, int) {
	var out []DriftedResource
	ignored := 0
	for _, r := range drift {
		props, whole := r.Properties, false
		for _, rule := range rules {
			if !ignores(rule, r) {
				continue
			}
			if len(rule.Properties) == 0 {
				whole = true
				break
			}
			props = slices.DeleteFunc(slices.Clone(props), func(p string) bool { return slices.Contains(rule.Properties, p) })
		}
		if whole || (r.Op == "update" && len(r.Properties) > 0 && len(props) == 0) {
			ignored++
			continue
		}
		r.Properties = props
		out = append(out, r)
	}
	return out, ignored
}

// ignores says whether rule covers r: its type, and its URN glob.
func ignores(rule DriftIgnore, r DriftedResource) bool {
	if rule.Type != "" && rule.Type != r.Type {
		return false
	}
	return rule.URN == "" || globMatch(rule.URN, r.URN)
}

// globMatch matches s against pattern, where "*" matches any text. It
// compiles nothing: the first part is a prefix, the last a suffix, and
// the others are found in order, each as early as it can be, which is
// enough for "*" alone.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return s == pattern
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
