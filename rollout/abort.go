package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/stackd/stackd/daemon/model"
)

// Meta is where abort records are kept: the daemon's store and the
// cluster's both have it. Meta's error wraps model.ErrNotFound for a key
// never put.
type Meta interface {
	Meta(key string) ([]byte, error)
	PutMeta(key string, value []byte) error
}

// metaKey is the key of set's abort record.
func metaKey(set string) string { return "rollout-abort/" + set }

// record is the stored form of a set's abort record.
type record struct {
	Members Aborted `json:"members"`
}

// readAborted reads set's abort record; none is an empty record.
func readAborted(m Meta, set string) (Aborted, error) {
	v, err := m.Meta(metaKey(set))
	if errors.Is(err, model.ErrNotFound) {
		return Aborted{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rollout: read the abort record of %s: %w", set, err)
	}
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("rollout: abort record of %s: %w", set, err)
	}
	if r.Members == nil {
		r.Members = Aborted{}
	}
	return r.Members, nil
}

// writeAborted replaces set's abort record.
func writeAborted(m Meta, set string, a Aborted) error {
	v, err := json.Marshal(record{Members: a})
	if err != nil {
		return fmt.Errorf("rollout: abort record of %s: %w", set, err)
	}
	if err := m.PutMeta(metaKey(set), v); err != nil {
		return fmt.Errorf("rollout: write the abort record of %s: %w", set, err)
	}
	return nil
}

// aborting is the record an abort of members writes over prev: the
// target of every member not done, and of prev what may still apply. A
// record of a member gone from the set, of an older generation than the
// member's, or of the very target the member is done on can never hold
// it again: it is pruned. Another record that differs from the member's
// target is kept, since this replica's view may lag the one that wrote
// it (commits have no order to tell).
func aborting(prev Aborted, members []model.RolloutMember) Aborted {
	out := Aborted{}
	for i := range members {
		m := &members[i]
		t, had := prev[m.Name]
		switch {
		case !m.Done():
			out[m.Name] = targetOf(m)
		case had && t.Generation >= m.Generation && t != targetOf(m):
			out[m.Name] = t
		}
	}
	return out
}

// memMeta is a Meta in memory, for a controller given none.
type memMeta struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memMeta) Meta(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return nil, fmt.Errorf("rollout: meta %s: %w", key, model.ErrNotFound)
	}
	return v, nil
}

func (s *memMeta) PutMeta(key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = append([]byte(nil), value...)
	return nil
}
