package review

import (
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
)

// Affected lists the stacks of cfg that a pull request of ev changing
// files concerns: their projectRepo is the pull request's repository,
// their branch its base branch, and a changed file is one of theirs
// (spec.PathFilter). A pull request that changes no file concerns none.
func Affected(cfg *spec.Config, ev Event, files []string) []*spec.Stack {
	if cfg == nil || len(files) == 0 {
		return nil
	}
	want := spec.RepoKeys(ev.URLs)
	var out []*spec.Stack
	for _, s := range cfg.Stacks {
		if s.Spec.ProjectRepo == "" || !want[spec.RepoKey(s.Spec.ProjectRepo)] ||
			strings.TrimPrefix(s.Spec.Branch, "refs/heads/") != ev.BaseBranch {
			continue
		}
		if Touches(&s.Spec, files) {
			out = append(out, s)
		}
	}
	return out
}

// Touches says whether one of files is among the files of s.
func Touches(s *spec.StackSpec, files []string) bool {
	globs, all := s.PathFilter()
	if all {
		return len(files) > 0
	}
	return slices.ContainsFunc(files, func(f string) bool {
		return slices.ContainsFunc(globs, func(g string) bool { return spec.MatchPath(g, f) })
	})
}

// ConfigChanges compares the stacks that config source source defines in
// cur (the config in force) and next (the config at a pull request's
// head): the stacks next adds or changes (spec, or the Program document
// it runs), and the names of those it removes.
func ConfigChanges(cur, next *spec.Config, source string) (changed []*spec.Stack, added map[string]bool, removed []string) {
	old := map[string]*spec.Stack{}
	for _, s := range cur.Stacks {
		if s.Source == source {
			old[s.Name] = s
		}
	}
	added = map[string]bool{}
	seen := map[string]bool{}
	for _, s := range next.Stacks {
		if s.Source != source {
			continue
		}
		seen[s.Name] = true
		o := old[s.Name]
		switch {
		case o == nil:
			added[s.Name] = true
			changed = append(changed, s)
		case o.SpecHash() != s.SpecHash() || programRevision(cur, o) != programRevision(next, s):
			changed = append(changed, s)
		}
	}
	for _, s := range cur.Stacks {
		if s.Source == source && !seen[s.Name] {
			removed = append(removed, s.Name)
		}
	}
	return changed, added, removed
}

// programRevision is the revision of the Program document s runs; empty
// for a stack with a Git source.
func programRevision(cfg *spec.Config, s *spec.Stack) string {
	if s.Spec.ProgramRef == nil {
		return ""
	}
	if p := cfg.Programs[s.Spec.ProgramRef.Name]; p != nil {
		return p.Revision()
	}
	return ""
}
