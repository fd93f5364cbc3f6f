package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
)

// item is one parameter set and what yielded it.
type item struct {
	params map[string]any
	origin string
}

// eval is one evaluation of one set's generators.
type eval struct {
	x   *Expander
	ctx context.Context
	set *spec.StackSet
	// commits are the commits resolved in this evaluation, by source
	// key and ref: one Resolve per repository and revision.
	commits   map[string]resolved
	watched   map[string]watched
	checkouts map[string]bool
	gens      []genResult // by top-level generator
	cur       int         // the top-level generator being evaluated
}

// genResult is what a top-level generator yielded in this evaluation.
type genResult struct {
	items        []item
	repo, commit string // its first git generator's, for the status
	offline      bool   // it holds a git generator Offline skipped
}

func (x *Expander) newEval(ctx context.Context, set *spec.StackSet) *eval {
	return &eval{x: x, ctx: ctx, set: set, commits: map[string]resolved{}, watched: map[string]watched{},
		checkouts: map[string]bool{}, gens: make([]genResult, len(set.Spec.Generators))}
}

// genPath is the config path of a set's top-level generator i. The spec
// keeps the set's own path ("spec" or "stackSets[N]") unexported, so the
// path is relative to the set's spec.
func genPath(_ *spec.StackSet, i int) string { return fmt.Sprintf("generators[%d]", i) }

// all evaluates every top-level generator, also after one failed, so
// that the status of each is current. errs is indexed like the
// generators, nil for those that succeeded.
func (e *eval) all() ([]spec.Generated, []error) {
	errs := make([]error, len(e.set.Spec.Generators))
	var out []spec.Generated
	for i, g := range e.set.Spec.Generators {
		e.cur = i
		p := genPath(e.set, i)
		items, err := e.gen(g)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", p, err)
			continue
		}
		e.gens[i].items = items
		for _, it := range items {
			out = append(out, spec.Generated{Params: it.params, Generator: p, Origin: it.origin})
		}
	}
	return out, errs
}

// kindOf names what g is, as the status shows it.
func kindOf(g spec.Generator) string {
	switch {
	case g.List != nil:
		return "list"
	case g.Git != nil && len(g.Git.Files) > 0:
		return "git files"
	case g.Git != nil:
		return "git directories"
	case g.Matrix != nil:
		return "matrix"
	case g.Merge != nil:
		return "merge"
	}
	return ""
}

func (e *eval) gen(g spec.Generator) ([]item, error) {
	set := 0
	for _, ok := range []bool{g.List != nil, g.Git != nil, g.Matrix != nil, g.Merge != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("a generator is exactly one of list, git, matrix and merge")
	}
	switch {
	case g.List != nil:
		return e.list(g.List)
	case g.Git != nil:
		return e.git(g.Git)
	case g.Matrix != nil:
		return e.matrix(g.Matrix)
	default:
		return e.merge(g.Merge)
	}
}

func (e *eval) list(l *spec.ListGenerator) ([]item, error) {
	if len(l.Elements) > e.x.opts.MaxItems {
		return nil, fmt.Errorf("list: %d elements, more than %d", len(l.Elements), e.x.opts.MaxItems)
	}
	out := make([]item, len(l.Elements))
	for i, el := range l.Elements {
		p, _ := deepCopy(el).(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		out[i] = item{params: p, origin: fmt.Sprintf("elements[%d]", i)}
	}
	return out, nil
}

// children evaluates a matrix's or merge's generators.
func (e *eval) children(kind string, gens []spec.Generator) ([][]item, error) {
	out := make([][]item, len(gens))
	for j, g := range gens {
		items, err := e.gen(g)
		if err != nil {
			return nil, fmt.Errorf("%s.generators[%d]: %w", kind, j, err)
		}
		out[j] = items
	}
	return out, nil
}

// matrix yields the product of two generators, each pair's parameters
// merged; a parameter both set to different values is an error.
func (e *eval) matrix(m *spec.MatrixGenerator) ([]item, error) {
	if len(m.Generators) != 2 {
		return nil, fmt.Errorf("matrix: combines exactly two generators, not %d", len(m.Generators))
	}
	sets, err := e.children("matrix", m.Generators)
	if err != nil {
		return nil, err
	}
	a, b := sets[0], sets[1]
	if len(b) > 0 && len(a) > e.x.opts.MaxItems/len(b) {
		return nil, fmt.Errorf("matrix: %d × %d parameter sets, more than %d", len(a), len(b), e.x.opts.MaxItems)
	}
	out := make([]item, 0, len(a)*len(b))
	for _, ai := range a {
		for _, bi := range b {
			p, err := combine(ai.params, bi.params, "")
			if err != nil {
				return nil, fmt.Errorf("matrix: %s × %s: %w", ai.origin, bi.origin, err)
			}
			out = append(out, item{params: p, origin: ai.origin + " × " + bi.origin})
		}
	}
	return out, nil
}

// combine merges two parameter maps, nested maps key by key; a key both
// hold with different values is an error naming it (dotted).
func combine(a, b map[string]any, prefix string) (map[string]any, error) {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		av, ok := out[k]
		bv := b[k]
		if !ok {
			out[k] = bv
			continue
		}
		am, aMap := av.(map[string]any)
		bm, bMap := bv.(map[string]any)
		if aMap && bMap {
			m, err := combine(am, bm, prefix+k+".")
			if err != nil {
				return nil, err
			}
			out[k] = m
			continue
		}
		if !reflect.DeepEqual(av, bv) {
			return nil, fmt.Errorf("parameter %s has different values in the two generators", prefix+k)
		}
	}
	return out, nil
}

// merge yields the first generator's parameter sets, each overlaid by the
// set of every later generator with the same values of the merge keys.
// Within one generator the merge keys' values are unique, as Argo CD
// requires.
func (e *eval) merge(m *spec.MergeGenerator) ([]item, error) {
	if len(m.MergeKeys) == 0 || len(m.Generators) < 2 {
		return nil, errors.New("merge: needs mergeKeys and at least two generators")
	}
	sets, err := e.children("merge", m.Generators)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(sets[0])
	if _, err := byMergeKey(out, m.MergeKeys); err != nil {
		return nil, fmt.Errorf("merge.generators[0]: %w", err)
	}
	for j, later := range sets[1:] {
		idx, err := byMergeKey(later, m.MergeKeys)
		if err != nil {
			return nil, fmt.Errorf("merge.generators[%d]: %w", j+1, err)
		}
		for i := range out {
			k, _ := mergeKey(out[i].params, m.MergeKeys)
			if o, ok := idx[k]; ok {
				out[i] = item{params: overlay(out[i].params, o.params), origin: out[i].origin + " + " + o.origin}
			}
		}
	}
	return out, nil
}

// byMergeKey indexes items by their merge keys' values.
func byMergeKey(items []item, keys []string) (map[string]item, error) {
	idx := make(map[string]item, len(items))
	for _, it := range items {
		k, err := mergeKey(it.params, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", it.origin, err)
		}
		if prev, dup := idx[k]; dup {
			return nil, fmt.Errorf("%s and %s have the same values of the merge keys %s", prev.origin, it.origin, strings.Join(keys, ", "))
		}
		idx[k] = it
	}
	return idx, nil
}

// mergeKey encodes the values of keys (dotted for nested parameters; a
// missing one is null) in params.
func mergeKey(params map[string]any, keys []string) (string, error) {
	vals := make([]any, len(keys))
	for i, k := range keys {
		vals[i] = lookup(params, k)
	}
	data, err := json.Marshal(vals)
	if err != nil {
		return "", fmt.Errorf("merge keys: %w", err)
	}
	return string(data), nil
}

// lookup returns the parameter at a dotted key, or nil.
func lookup(params map[string]any, key string) any {
	var v any = params
	for part := range strings.SplitSeq(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// overlay returns a with b's parameters over it, nested maps key by key.
func overlay(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	for k, bv := range b {
		am, aMap := out[k].(map[string]any)
		bm, bMap := bv.(map[string]any)
		if aMap && bMap {
			out[k] = overlay(am, bm)
			continue
		}
		out[k] = bv
	}
	return out
}

// deepCopy copies the maps and slices of a parameter value, so that the
// Expander's output shares nothing with the spec it was given.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}
