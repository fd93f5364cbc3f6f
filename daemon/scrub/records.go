package scrub

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/stackd/stackd/daemon/model"
)

// Status returns s with every message and output cleaned by r, and
// whether that changed anything. It copies what it changes and leaves
// s's maps and slices alone.
func Status(s model.StackStatus, r *Redactor) (model.StackStatus, bool) {
	changed := false
	for i, c := range s.Conditions {
		if m := r.Clean(c.Message); m != c.Message {
			if !changed {
				s.Conditions, changed = slices.Clone(s.Conditions), true
			}
			s.Conditions[i].Message = m
		}
	}
	if outs, ok := Outputs(s.Outputs, r); ok {
		s.Outputs, changed = outs, true
	}
	if lu := s.LastUpdate; lu != nil {
		if m := r.Clean(lu.Message); m != lu.Message {
			c := *lu
			c.Message, s.LastUpdate, changed = m, &c, true
		}
	}
	if h := s.Health; h != nil {
		if m := r.Clean(h.Message); m != h.Message {
			s.Health, changed = &model.Health{Status: h.Status, Message: m}, true
		}
	}
	if dr := s.Drift; dr != nil {
		if m := r.Clean(dr.Message); m != dr.Message {
			s.Drift, changed = dr.Clone(), true
			s.Drift.Message = m
		}
	}
	if sc := s.SkippedCommit; sc != nil {
		if m := r.Clean(sc.Reason); m != sc.Reason {
			c := *sc
			c.Reason, s.SkippedCommit, changed = m, &c, true
		}
	}
	if g, ok := Gate(s.Gate, r); ok {
		s.Gate, changed = g, true
	}
	return s, changed
}

// Gate returns g cleaned by r, every text and input value of it
// (a policy's message or a plain input may echo a secret), and whether
// that changed anything.
func Gate(g *model.Gate, r *Redactor) (*model.Gate, bool) {
	if g == nil {
		return nil, false
	}
	raw, err := json.Marshal(g)
	if err != nil {
		return g, false
	}
	clean := r.JSON(raw)
	if bytes.Equal(clean, raw) {
		return g, false
	}
	var c model.Gate
	if err := json.Unmarshal(clean, &c); err != nil {
		return &model.Gate{State: g.State, Reason: "[redacted]", Commit: g.Commit, Generation: g.Generation,
			ReconcileRequest: g.ReconcileRequest, Update: g.Update, Plan: g.Plan, Created: g.Created, Expires: g.Expires}, true
	}
	return &c, true
}

// Outputs returns outs cleaned by r, names and JSON values, and
// whether that changed anything; outs itself when it did not.
func Outputs(outs map[string]json.RawMessage, r *Redactor) (map[string]json.RawMessage, bool) {
	var clean map[string]json.RawMessage
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		v := outs[k]
		cv, ck := r.JSON(v), r.Clean(k)
		if ck == k && bytes.Equal(cv, v) {
			continue
		}
		if clean == nil {
			clean = maps.Clone(outs)
		}
		delete(clean, k)
		clean[ck] = cv
	}
	if clean == nil {
		return outs, false
	}
	return clean, true
}

// Plain returns a plain value (maps, slices and scalars, as
// spec.Plain makes them) with every string and key cleaned, in new maps
// and slices: a stack's spec view shows no other stack's secret either.
func Plain(v any, r *Redactor) any {
	switch t := v.(type) {
	case string:
		return r.Clean(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[r.Clean(k)] = Plain(e, r)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = Plain(e, r)
		}
		return out
	}
	return v
}

// Update returns u with its reason and message cleaned by r.
func Update(u model.Update, r *Redactor) model.Update {
	u.Reason, u.Message = r.Clean(u.Reason), r.Clean(u.Message)
	return u
}

// ConfigStatus returns s with its errors and sources cleaned by r.
func ConfigStatus(s model.ConfigStatus, r *Redactor) model.ConfigStatus {
	s.Error = r.Clean(s.Error)
	if s.Health != nil {
		s.Health = &model.Health{Status: s.Health.Status, Message: r.Clean(s.Health.Message)}
	}
	s.Sources = slices.Clone(s.Sources)
	for i := range s.Sources {
		src := &s.Sources[i]
		src.Source, src.Error, src.Health.Message = r.Clean(src.Source), r.Clean(src.Error), r.Clean(src.Health.Message)
		if src.Git != nil {
			g := *src.Git
			g.URL, src.Git = r.Clean(g.URL), &g
		}
	}
	if s.Policies != nil {
		p := *s.Policies
		p.Source, p.Error, s.Policies = r.Clean(p.Source), r.Clean(p.Error), &p
	}
	return s
}
