package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// SpecHash is a content hash of the stack's spec. It plays the role of
// Kubernetes' metadata.generation: when it changes, the stack's
// generation grows and the stack runs again. Annotations are not part of
// it, as they are not part of a generation.
func (s *Stack) SpecHash() string {
	return ContentHash(s.Spec)
}

// Revision identifies the content of a Program; a stack that uses it sees
// it where a Git stack sees a commit.
func (p *Program) Revision() string {
	return ContentHash(p.Program)
}

// ContentHash hashes the JSON encoding of Plain(v): set fields only, map
// keys sorted. Leaving unset fields out keeps hashes (and so generations)
// stable when a later stackd adds a field, and Kubernetes-only fields
// never count.
func ContentHash(v any) string {
	data, err := json.Marshal(Plain(v))
	if err != nil {
		panic("spec: hash a spec: " + err.Error()) // only JSON-safe values are decoded
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Fingerprint identifies what a config means: its stacks' specs,
// annotations, labels and owners, Programs, ConfigMaps, Secrets and the
// StackSets' rollout strategies (whose steps select stacks by label).
// Comments, order and formatting do not count, so a save that changes
// nothing is no reload.
func (c *Config) Fingerprint() string {
	type stackPrint struct {
		Name, Spec, Dir, Source string
		Annotations             map[string]string
		Labels                  map[string]string
		Owner                   string
	}
	stacks := make([]stackPrint, len(c.Stacks))
	for i, s := range c.Stacks {
		stacks[i] = stackPrint{s.Name, s.SpecHash(), s.Dir, s.Source, s.Annotations, s.Labels, s.Owner}
	}
	programs := map[string]string{}
	for name, p := range c.Programs {
		programs[name] = p.Revision()
	}
	strategies := map[string]*RolloutStrategy{}
	for _, set := range c.StackSets {
		strategies[set.Name] = set.Spec.Strategy
	}
	return ContentHash(struct {
		Stacks     []stackPrint
		Programs   map[string]string
		ConfigMaps map[string]map[string]string
		Secrets    map[string]map[string]string
		Strategies map[string]*RolloutStrategy
	}{stacks, programs, c.ConfigMaps, c.Secrets, strategies})
}
