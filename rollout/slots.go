package rollout

import (
	"context"
	"sync"
)

// Slots bound how many stacks of a step update at once. A slot is named
// by key (a set's name and a step's index) and taken by holder (a
// stack's name).
type Slots interface {
	// TryAcquire takes a slot of key for holder if fewer than max
	// holders hold one; it says whether holder holds one now. Taking a
	// slot holder already holds is true. An error takes none.
	TryAcquire(ctx context.Context, key, holder string, max int) (bool, error)
	// Release gives holder's slot of key back; releasing none is no
	// error.
	Release(ctx context.Context, key, holder string) error
}

// LocalSlots are the slots of a single replica, in memory, exact. The
// zero value is ready to use.
type LocalSlots struct {
	mu   sync.Mutex
	held map[string]map[string]bool
}

var _ Slots = (*LocalSlots)(nil)

// TryAcquire implements Slots; it never fails.
func (l *LocalSlots) TryAcquire(_ context.Context, key, holder string, max int) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[key]
	if h[holder] {
		return true, nil
	}
	if len(h) >= max {
		return false, nil
	}
	if h == nil {
		if l.held == nil {
			l.held = map[string]map[string]bool{}
		}
		h = map[string]bool{}
		l.held[key] = h
	}
	h[holder] = true
	return true, nil
}

// Release implements Slots; it never fails.
func (l *LocalSlots) Release(_ context.Context, key, holder string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held[key], holder)
	if len(l.held[key]) == 0 {
		delete(l.held, key)
	}
	return nil
}

// Holders is how many holders hold a slot of key now.
func (l *LocalSlots) Holders(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held[key])
}
