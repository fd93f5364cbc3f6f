package daemon

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
	return contentHash(s.Spec)
}

// Revision identifies the content of a Program; a stack that uses it sees
// it where a Git stack sees a commit.
func (p *Program) Revision() string {
	return contentHash(p.Program)
}

// contentHash hashes the JSON encoding of plain(v): set fields only, map
// keys sorted. Leaving unset fields out keeps hashes (and so generations)
// stable when a later stackd adds a field, and Kubernetes-only fields
// never count.
func contentHash(v any) string {
	data, err := json.Marshal(plain(v))
	if err != nil {
		panic("daemon: hash a spec: " + err.Error()) // only JSON-safe values are decoded
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
