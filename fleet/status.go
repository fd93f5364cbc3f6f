package fleet

import (
	"fmt"
	"slices"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// maxOrigins bounds the origins a generator's status lists.
const maxOrigins = 100

// offlineError is the status of a git generator Offline skipped.
const offlineError = "not evaluated: offline"

// Status is what each top-level generator of the named set yielded in
// its last expansion; nil for a set not expanded (or forgotten by Keep).
// A generator that failed keeps the items, commit and time of its last
// success, as the set keeps its output.
func (x *Expander) Status(set string) []model.GeneratorStatus {
	x.mu.Lock()
	defer x.mu.Unlock()
	if st := x.sets[set]; st != nil {
		return slices.Clone(st.status)
	}
	return nil
}

// statuses are the generators' statuses after this evaluation, errs
// indexed like them; prev are those of the last evaluation of the same
// definitions.
func (e *eval) statuses(prev []model.GeneratorStatus, errs []error, now time.Time) []model.GeneratorStatus {
	out := make([]model.GeneratorStatus, len(e.gens))
	for i, g := range e.set.Spec.Generators {
		r := e.gens[i]
		s := model.GeneratorStatus{Path: genPath(e.set, i), Kind: kindOf(g), Repository: r.repo, Commit: r.commit}
		switch {
		case errs[i] != nil:
			if i < len(prev) {
				p := prev[i]
				s.Commit, s.Items, s.Origins, s.LastSuccess = p.Commit, p.Items, p.Origins, p.LastSuccess
			}
			s.Error = errs[i].Error()
			if r.commit != "" && r.commit != s.Commit {
				s.Error = fmt.Sprintf("at commit %.12s: %s", r.commit, s.Error)
			}
		case r.offline:
			s.Items, s.Origins, s.Error = len(r.items), origins(r.items), offlineError
		default:
			s.Items, s.Origins, s.LastSuccess = len(r.items), origins(r.items), now
		}
		out[i] = s
	}
	return out
}

// origins lists what yielded items, at most maxOrigins of them.
func origins(items []item) []string {
	out := make([]string, 0, min(len(items), maxOrigins))
	for _, it := range items[:min(len(items), maxOrigins)] {
		out = append(out, it.origin)
	}
	return out
}
