package spec

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"
)

// MaxGeneratedStacks bounds the stacks one StackSet may generate.
const MaxGeneratedStacks = 20000

type compactStackSet struct {
	Name         string            `yaml:"name"`
	Labels       map[string]string `yaml:"labels"`
	StackSetSpec `yaml:",inline"`
}

type stackSetManifest struct {
	manifestHead `yaml:",inline"`
	Spec         StackSetSpec `yaml:"spec"`
}

// addStackSetManifest reads a stackd.io document: a StackSet of v1.
func (l *loader) addStackSetManifest(d *decoder, dir string, n *yaml.Node, keys map[string]*yaml.Node, version, kind string) {
	switch {
	case version != "v1":
		d.errorf(keys["apiVersion"], "apiVersion", "unsupported version of stackd.io (stackd reads v1)")
	case kind != "StackSet":
		d.errorf(keys["kind"], "kind", "unknown stackd.io kind (stackd reads StackSet)")
	default:
		var m stackSetManifest
		d.decode(n, "", reflect.ValueOf(&m).Elem())
		l.addStackSet(d, dir, m.Metadata.Name, m.Metadata.Labels, m.Spec, "spec")
	}
}

// addStackSet adds a set whose spec is at base ("spec" or
// "stackSets[N]"), when its name is valid and not taken by another set.
func (l *loader) addStackSet(d *decoder, dir, name string, labels map[string]string, spec StackSetSpec, base string) {
	namePath := base + ".name"
	label := fmt.Sprintf("%s %q", base, name)
	if base == "spec" {
		namePath, label = "metadata.name", fmt.Sprintf("StackSet %q", name)
	}
	if !l.checkName(d, name, namePath) {
		return
	}
	for _, other := range l.cfg.StackSets {
		if other.Name == name {
			d.errorf(nodeAt(d, namePath), namePath, "duplicate StackSet name %q (first defined at %s)", name, other.Pos)
			return
		}
	}
	spec.Labels = labels
	l.cfg.StackSets = append(l.cfg.StackSets, &StackSet{
		Name: name, Spec: spec, Pos: d.src[namePath],
		Dir: dir, Source: l.source, Root: l.root,
		src: d.src, keys: d.keys, base: base, label: label, hostPaths: l.hostPaths,
	})
}

// complete checks the StackSets, renders their stacks when expand is not
// nil and nothing read so far is wrong, and validates the whole config.
func (l *loader) complete(expand Expander) (*Config, Diagnostics, error) {
	for _, set := range l.cfg.StackSets {
		v := &validator{cfg: l.cfg}
		v.stackSet(set)
		l.diags = append(l.diags, v.diags...)
	}
	if expand != nil && len(l.diags.Errors()) == 0 {
		for _, set := range l.cfg.StackSets {
			l.expandSet(set, expand)
		}
	}
	return l.finish()
}

// expandSet renders the stacks of one set. An error of expand is one
// diagnostic, at the set's generators.
func (l *loader) expandSet(set *StackSet, expand Expander) {
	at := joinPath(set.base, "generators")
	gens, err := expand(set)
	switch {
	case err != nil:
		l.diags = append(l.diags, Diagnostic{Pos: set.at(at), Path: at, Msg: fmt.Sprintf("generating the stacks of StackSet %q: %v", set.Name, err)})
		return
	case len(gens) > MaxGeneratedStacks:
		l.diags = append(l.diags, Diagnostic{Pos: set.at(at), Path: at,
			Msg: fmt.Sprintf("the generators yield %d parameter sets, more than %d (the limit of one StackSet)", len(gens), MaxGeneratedStacks)})
		return
	}
	for _, g := range gens {
		l.renderStack(set, g)
	}
}

// at finds the position recorded for path, or for its nearest parent.
func (s *StackSet) at(path string) Pos {
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := s.src[p]; ok {
			return pos
		}
	}
	return s.Pos
}

// renderStack renders the set's template over one parameter set and adds
// the stack it describes, owned by the set.
func (l *loader) renderStack(set *StackSet, g Generated) {
	base := fmt.Sprintf("%s (%s, %s): template", set.label, g.Generator, g.Origin)
	tmpl := &set.Spec.Template
	n, filled, err := tmpl.render(g.Params)
	if err != nil {
		l.diags = append(l.diags, tmpl.renderDiagnostic(err, set.Pos.File, base))
		return
	}
	nodes := 0
	d := newDecoder(set.Pos.File, &nodes)
	d.rendered = true
	defer func() { l.diags = append(l.diags, d.diags...) }()
	var doc renderedTemplate
	d.decode(n, base, reflect.ValueOf(&doc).Elem())
	if set.Spec.SyncPolicy != nil && set.Spec.SyncPolicy.PreserveResourcesOnDeletion {
		doc.Spec.DestroyOnFinalize = false
	}
	l.source, l.root, l.hostPaths = set.Source, set.Root, set.hostPaths
	meta := stackMeta{doc.Metadata.Annotations, doc.Metadata.Labels}
	if s := l.addStack(d, set.Dir, doc.Metadata.Name, meta, doc.Spec, base+".metadata.name", base+".spec"); s != nil {
		s.Owner = set.Owner()
		if set.readsGit() {
			s.gitFilled = filledPaths(n, filled)
		}
	}
}

// readsGit says whether a generator of the set, at any depth, reads a Git
// repository: its parameters are then written by that repository's
// committers, not by the config's author.
func (s *StackSet) readsGit() bool {
	var reads func(gens []Generator) bool
	reads = func(gens []Generator) bool {
		for _, g := range gens {
			switch {
			case g.Git != nil:
				return true
			case g.Matrix != nil && reads(g.Matrix.Generators), g.Merge != nil && reads(g.Merge.Generators):
				return true
			}
		}
		return false
	}
	return reads(s.Spec.Generators)
}
