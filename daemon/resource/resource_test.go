package resource

import (
	"reflect"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestAttribute(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	before, after := start.Add(-time.Hour), start.Add(time.Second)
	prev := []model.Resource{{URN: "kept", ChangedBy: "s-1"}, {URN: "changed", ChangedBy: "s-1"}}
	cur := []model.Resource{
		{URN: "kept", Created: before, Modified: before},
		{URN: "changed", Created: before, Modified: after},
		{URN: "new", Created: after, Modified: after},
		{URN: "old-unknown", Created: before, Modified: before},
		{URN: "no-times"},
		{URN: "created-at-start", Created: start},
	}
	Attribute(cur, prev, "s-2", start)
	want := map[string]string{"kept": "s-1", "changed": "s-2", "new": "s-2", "old-unknown": "", "no-times": "", "created-at-start": "s-2"}
	for _, r := range cur {
		if r.ChangedBy != want[r.URN] {
			t.Errorf("%s: ChangedBy = %q, want %q", r.URN, r.ChangedBy, want[r.URN])
		}
	}
}

func TestMarkDrift(t *testing.T) {
	check := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	resources := func() []model.Resource {
		return []model.Resource{
			{URN: "a", Modified: check.Add(-time.Hour)},
			{URN: "b", Modified: check.Add(-time.Hour)},
			{URN: "c"},
			{URN: "newer", Created: check.Add(time.Minute), Modified: check.Add(time.Minute)},
			{URN: "stack", Type: "pulumi:pulumi:Stack"},
			{URN: "provider", Type: "pulumi:providers:stackdtest"},
		}
	}
	found := []spec.DriftedResource{{URN: "a", Op: "update", Properties: []string{"content"}}, {URN: "c", Op: "delete"}}
	for _, tc := range []struct {
		name  string
		drift *spec.DriftStatus
		want  map[string]string
	}{
		{"no check", nil, map[string]string{"a": "", "b": "", "c": "", "newer": "", "stack": "", "provider": ""}},
		{"check failed", &spec.DriftStatus{State: spec.DriftCheckFailed, LastCheck: check, Resources: found},
			map[string]string{"a": "", "b": "", "c": "", "newer": "", "stack": "", "provider": ""}},
		{"in sync", &spec.DriftStatus{State: spec.DriftInSync, LastCheck: check},
			map[string]string{"a": model.ResourceInSync, "b": model.ResourceInSync, "c": model.ResourceInSync, "newer": "", "stack": "", "provider": ""}},
		{"drifted", &spec.DriftStatus{State: spec.DriftDrifted, LastCheck: check, Resources: found},
			map[string]string{"a": model.ResourceDrifted, "b": model.ResourceInSync, "c": model.ResourceDeleted, "newer": "", "stack": "", "provider": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := resources()
			MarkDrift(rs, tc.drift)
			got := map[string]string{}
			for _, r := range rs {
				got[r.URN] = r.Drift
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("drift = %v, want %v", got, tc.want)
			}
			if tc.name == "drifted" && !reflect.DeepEqual(rs[0].DriftProperties, []string{"content"}) {
				t.Errorf("a's properties = %v, want [content]", rs[0].DriftProperties)
			}
		})
	}
}
