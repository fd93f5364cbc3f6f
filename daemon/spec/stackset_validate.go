package spec

import (
	"fmt"
	"regexp"
	"strings"
)

// maxGeneratorDepth is how deep matrix and merge generators nest: a
// matrix of a matrix, no deeper.
const maxGeneratorDepth = 2

var (
	labelName   = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`)
	labelPrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// stackSet checks what a set's types cannot say. It makes an implied
// RollingSync explicit: a strategy with rollingSync and no type.
func (v *validator) stackSet(set *StackSet) {
	v.s = &Stack{Name: set.Name, Pos: set.Pos, Dir: set.Dir, Root: set.Root, hostPaths: set.hostPaths,
		src: set.src, keys: set.keys, base: set.base}
	if len(set.Spec.Generators) == 0 {
		v.errorf("generators", "a StackSet needs at least one generator")
	}
	if set.Spec.Template.node == nil {
		v.errorf("template", "a StackSet needs a template")
	}
	v.generators("generators", set.Spec.Generators, 0)
	v.strategy(set.Spec.Strategy)
}

// generators checks a list of generators nested depth matrix or merge
// generators deep.
func (v *validator) generators(rel string, gens []Generator, depth int) {
	for i, g := range gens {
		p := indexPath(rel, i)
		set := 0
		for _, isSet := range []bool{g.List != nil, g.Git != nil, g.Matrix != nil, g.Merge != nil} {
			if isSet {
				set++
			}
		}
		switch {
		case set != 1:
			v.errorf(p, "a generator sets exactly one of list, git, matrix, merge")
		case g.Git != nil:
			v.gitGenerator(p+".git", g.Git)
		case g.Matrix != nil:
			v.combined(p+".matrix", g.Matrix.Generators, depth)
			if n := len(g.Matrix.Generators); n != 2 && depth < maxGeneratorDepth {
				v.errorf(p+".matrix.generators", "a matrix combines exactly 2 generators, not %d", n)
			}
		case g.Merge != nil:
			v.combined(p+".merge", g.Merge.Generators, depth)
			if n := len(g.Merge.Generators); n < 2 && depth < maxGeneratorDepth {
				v.errorf(p+".merge.generators", "a merge combines at least 2 generators, not %d", n)
			}
			v.mergeKeys(p+".merge.mergeKeys", g.Merge.MergeKeys)
		}
	}
}

// combined checks the generators of a matrix or merge at rel.
func (v *validator) combined(rel string, gens []Generator, depth int) {
	if depth >= maxGeneratorDepth {
		v.errorf(rel, "matrix and merge generators nest at most %d levels deep", maxGeneratorDepth)
		return
	}
	v.generators(rel+".generators", gens, depth+1)
}

func (v *validator) mergeKeys(rel string, keys []string) {
	if len(keys) == 0 {
		v.errorf(rel, "a merge needs mergeKeys: the parameters on which its generators' sets agree")
	}
	v.nonEmpty(rel, keys)
}

// gitGenerator checks a git generator at rel.
func (v *validator) gitGenerator(rel string, g *GitGenerator) {
	switch msg := repoURLProblem(g.RepoURL); {
	case g.RepoURL == "":
		v.errorf(rel, "missing repoURL")
	case msg != "":
		v.errorf(rel+".repoURL", "%s", msg)
	}
	if r := g.Revision; r != "" && !IsFullSHA(r) && !validRefName(r) {
		v.errorf(rel+".revision", "not a valid Git branch, tag or full commit SHA")
	}
	if (len(g.Directories) > 0) == (len(g.Files) > 0) {
		v.errorf(rel, "a git generator sets exactly one of directories and files")
	}
	v.globs(rel+".directories", g.Directories)
	v.globs(rel+".files", g.Files)
	base := v.s.base
	v.s.base = joinPath(base, rel)
	v.gitAuth(&StackSpec{GitAuth: g.GitAuth})
	v.s.base = base
}

func (v *validator) globs(rel string, globs []GitPathGlob) {
	for i, g := range globs {
		if err := checkGlob(g.Path); err != nil {
			v.errorf(indexPath(rel, i)+".path", "%v", err)
		}
	}
}

// strategy checks a rollout strategy and makes an implied RollingSync
// explicit.
func (v *validator) strategy(s *RolloutStrategy) {
	if s == nil {
		return
	}
	switch s.Type {
	case "":
		if s.RollingSync == nil {
			return
		}
		s.Type = RollingSyncStrategy
	case RollingSyncStrategy:
	default:
		v.errorf("strategy.type", "unknown strategy type (stackd knows %s)", RollingSyncStrategy)
		return
	}
	if s.RollingSync == nil || len(s.RollingSync.Steps) == 0 {
		v.errorf("strategy", "a RollingSync strategy needs rollingSync.steps")
		return
	}
	for i, step := range s.RollingSync.Steps {
		v.step(indexPath("strategy.rollingSync.steps", i), step)
	}
}

func (v *validator) step(rel string, s RolloutStep) {
	for _, k := range sortedKeys(s.MatchLabels) {
		p := joinPath(rel+".matchLabels", k)
		if msg := labelKeyProblem(k); msg != "" {
			v.keyErrorf(p, "%s", msg)
		} else if !labelValueOK(s.MatchLabels[k]) {
			v.errorf(p, "not a valid label value: up to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
		}
	}
	for i, e := range s.MatchExpressions {
		v.expression(indexPath(rel+".matchExpressions", i), e)
	}
	if s.MaxUpdate != "" {
		if _, _, err := parseMaxUpdate(s.MaxUpdate); err != nil {
			v.errorf(rel+".maxUpdate", "%v", err)
		}
	}
}

func (v *validator) expression(rel string, e LabelExpression) {
	if msg := labelKeyProblem(e.Key); msg != "" {
		v.errorf(rel+".key", "%s", msg)
	}
	switch e.Operator {
	case OpIn, OpNotIn:
		if len(e.Values) == 0 {
			v.errorf(rel+".values", "operator %s needs values", e.Operator)
		}
	case OpExists, OpDoesNotExist:
		if len(e.Values) > 0 {
			v.errorf(rel+".values", "operator %s takes no values", e.Operator)
		}
	case "":
		v.errorf(rel, "missing operator (In, NotIn, Exists or DoesNotExist)")
	default:
		v.errorf(rel+".operator", "unknown operator %q (In, NotIn, Exists or DoesNotExist)", e.Operator)
	}
}

// labelKeyProblem says why key is not a Kubernetes label key (an
// optional DNS-subdomain prefix and a slash, then a name), or "".
func labelKeyProblem(key string) string {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	switch {
	case key == "":
		return "missing label key"
	case hasPrefix && (len(prefix) > 253 || !labelPrefix.MatchString(prefix)):
		return fmt.Sprintf("invalid label key %q: its prefix must be a DNS subdomain (example.com/)", key)
	case len(name) > 63 || !labelName.MatchString(name):
		return fmt.Sprintf("invalid label key %q: up to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", key)
	}
	return ""
}

// labelValueOK reports whether val is a Kubernetes label value: empty, or
// up to 63 letters, digits, '-', '_' and '.' starting and ending with a
// letter or digit.
func labelValueOK(val string) bool {
	return val == "" || len(val) <= 63 && labelName.MatchString(val)
}
