package spec

// StackSet is a template of stacks and the generators that fill it in, as
// Argo CD's ApplicationSet is for applications. It is written either as an
// item of a compact document's stackSets: list or as a manifest
//
//	apiVersion: stackd.io/v1
//	kind: StackSet
//	metadata: {name: NAME}
//	spec: {generators: [...], template: {...}, strategy: {...}, syncPolicy: {...}}
//
// The stacks it generates are ordinary stacks whose Owner is "StackSet/NAME".
type StackSet struct {
	Name string
	Spec StackSetSpec
	// Pos is where the set's name is written.
	Pos Pos
	// Dir, Source and Root are the defining file's, as for a Stack.
	Dir, Source, Root string

	// src and keys are the defining document's positions.
	src  map[string]Pos
	keys map[string]Pos
	base string // path of the spec: "spec" or "stackSets[N]"
	// label names the set in the messages of its generated stacks:
	// `stackSets[N] "NAME"` or `StackSet "NAME"`.
	label string
	// hostPaths are the rules of the set's input (Input.HostPaths), which
	// its generated stacks keep.
	hostPaths *HostPaths
}

// Owner is what the set's stacks name as their owner.
func (s *StackSet) Owner() string { return "StackSet/" + s.Name }

// StackSetSpec is a StackSet's body.
type StackSetSpec struct {
	Generators []Generator `yaml:"generators"`
	// Template is a stack: metadata (name, labels, annotations) and spec,
	// every string of which is a Go template over a generator's parameters
	// (executed with missingkey=error).
	Template   StackTemplate     `yaml:"template"`
	Strategy   *RolloutStrategy  `yaml:"strategy"`
	SyncPolicy *StackSetPolicy   `yaml:"syncPolicy"`
	Labels     map[string]string `yaml:"-"`
}

// StackSetPolicy says what becomes of a generated stack that its
// generators no longer produce.
type StackSetPolicy struct {
	// PreserveResourcesOnDeletion keeps the resources of a removed stack
	// even when the template says destroyOnFinalize.
	PreserveResourcesOnDeletion bool `yaml:"preserveResourcesOnDeletion"`
}

// Generator produces parameter sets; exactly one of its fields is set.
type Generator struct {
	List   *ListGenerator   `yaml:"list"`
	Git    *GitGenerator    `yaml:"git"`
	Matrix *MatrixGenerator `yaml:"matrix"`
	Merge  *MergeGenerator  `yaml:"merge"`
}

// ListGenerator yields its elements, each a mapping of parameters.
type ListGenerator struct {
	Elements []map[string]any `yaml:"elements"`
}

// GitGenerator yields a parameter set per directory (Directories) or per
// file (Files) of a repository's revision.
type GitGenerator struct {
	RepoURL  string         `yaml:"repoURL"`
	Revision string         `yaml:"revision"` // a branch, tag or full commit; "HEAD" when empty
	GitAuth  *GitAuthConfig `yaml:"gitAuth"`
	// Directories: each directory matching a path glob and no exclude one
	// yields {path: {path, basename, basenameNormalized, segments}}.
	Directories []GitPathGlob `yaml:"directories"`
	// Files: each JSON or YAML file matching a glob yields its fields,
	// flattened, plus path as for Directories (of the file's directory).
	Files []GitPathGlob `yaml:"files"`
}

// GitPathGlob is a path pattern of a git generator, path.Match syntax
// with "**" for any number of directories.
type GitPathGlob struct {
	Path    string `yaml:"path"`
	Exclude bool   `yaml:"exclude"`
}

// MatrixGenerator yields the cartesian product of two generators'
// parameter sets, each pair's mappings merged.
type MatrixGenerator struct {
	Generators []Generator `yaml:"generators"`
}

// MergeGenerator yields the first generator's parameter sets, each
// overlaid by the set of every later generator that agrees on MergeKeys.
type MergeGenerator struct {
	MergeKeys  []string    `yaml:"mergeKeys"`
	Generators []Generator `yaml:"generators"`
}

// RolloutStrategy orders the updates of a set's stacks.
type RolloutStrategy struct {
	Type        string       `yaml:"type"` // "RollingSync" or empty (all at once)
	RollingSync *RollingSync `yaml:"rollingSync"`
}

// RollingSync is a list of steps: a stack of a later step updates to a
// new revision only once every stack of the earlier steps succeeded on it.
type RollingSync struct {
	Steps []RolloutStep `yaml:"steps"`
}

// RolloutStep selects stacks by label; at most MaxUpdate of them update at
// once (unlimited when unset).
type RolloutStep struct {
	MatchExpressions []LabelExpression `yaml:"matchExpressions"`
	MatchLabels      map[string]string `yaml:"matchLabels"`
	// MaxUpdate is a count ("1") or a percentage of the step's stacks
	// ("25%", rounded down, at least 1). Empty: no limit.
	MaxUpdate string `yaml:"maxUpdate"`
}

// LabelExpression is a Kubernetes label selector requirement: operator
// In, NotIn, Exists or DoesNotExist.
type LabelExpression struct {
	Key      string   `yaml:"key"`
	Operator string   `yaml:"operator"`
	Values   []string `yaml:"values"`
}

// Generated is one parameter set a generator yielded, and what produced
// it, for messages: Generator is the generator's path
// ("stackSets[0].generators[1]" or "spec.generators[1]") and Origin what
// yielded it ("envs/dev", "elements[2]").
type Generated struct {
	Params    map[string]any
	Generator string
	Origin    string
}

// Expander evaluates a set's generators. An error leaves the config
// unapplied; an expander that keeps the last good output of a set whose
// generator fails returns that instead, so that the failure changes
// nothing.
type Expander func(set *StackSet) ([]Generated, error)
