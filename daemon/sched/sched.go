// Package sched keeps what the reconcile loop needs to evaluate only the
// stacks an event or the clock concerns: a set of dirty keys, a timer
// heap of due times, per group (a config source) the busy keys of each
// sync wave, and the polling rounds of a repository. It is pure
// bookkeeping, not safe for concurrent use: the loop holds its lock.
package sched

import (
	"cmp"
	"container/heap"
	"maps"
	"math/rand/v2"
	"time"
)

// Queue says which keys need an evaluation: those marked dirty, and those
// whose due time came.
type Queue[K comparable] struct {
	dirty map[K]bool
	due   map[K]time.Time
	heap  dueHeap[K] // may hold stale entries: due[k] says which is live
}

// MarkDirty asks for k's evaluation at the next Take.
func (q *Queue[K]) MarkDirty(k K) {
	if q.dirty == nil {
		q.dirty = map[K]bool{}
	}
	q.dirty[k] = true
}

// Clean forgets that k was marked dirty (it has just been evaluated).
func (q *Queue[K]) Clean(k K) { delete(q.dirty, k) }

// Dirty says whether some key is marked dirty.
func (q *Queue[K]) Dirty() bool { return len(q.dirty) > 0 }

// SetDue makes k due at at; the zero time makes it due never.
func (q *Queue[K]) SetDue(k K, at time.Time) {
	if at.IsZero() {
		delete(q.due, k)
		return
	}
	if q.due == nil {
		q.due = map[K]time.Time{}
	}
	if cur, ok := q.due[k]; ok && cur.Equal(at) {
		return
	}
	q.due[k] = at
	heap.Push(&q.heap, dueEntry[K]{at: at, key: k})
}

// Forget drops k: it is neither dirty nor due any more.
func (q *Queue[K]) Forget(k K) {
	delete(q.dirty, k)
	delete(q.due, k)
}

// Take returns the keys to evaluate at now, dirty or due, each once, and
// clears their marks; their due times are dropped (set them again).
func (q *Queue[K]) Take(now time.Time) []K {
	out := make([]K, 0, len(q.dirty))
	seen := make(map[K]bool, len(q.dirty))
	for k := range q.dirty {
		out, seen[k] = append(out, k), true
		delete(q.due, k)
	}
	clear(q.dirty)
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := heap.Pop(&q.heap).(dueEntry[K])
		if cur, ok := q.due[e.key]; !ok || !cur.Equal(e.at) {
			continue // stale: due again later, or no longer
		}
		delete(q.due, e.key)
		if !seen[e.key] {
			out, seen[e.key] = append(out, e.key), true
		}
	}
	return out
}

// Next is how long until the earliest due time after now; ok is false
// when no key is due.
func (q *Queue[K]) Next(now time.Time) (time.Duration, bool) {
	for len(q.heap) > 0 {
		e := q.heap[0]
		if cur, ok := q.due[e.key]; ok && cur.Equal(e.at) {
			return e.at.Sub(now), true
		}
		heap.Pop(&q.heap) // stale
	}
	return 0, false
}

type dueEntry[K comparable] struct {
	at  time.Time
	key K
}

type dueHeap[K comparable] []dueEntry[K]

func (h dueHeap[K]) Len() int           { return len(h) }
func (h dueHeap[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap[K]) Push(x any)        { *h = append(*h, x.(dueEntry[K])) }
func (h *dueHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Round is the polling schedule of one repository: every key that tracks
// it polls in the same round, so that their resolves share one call. A
// round starts every period: the shortest period among the keys that
// joined the last round, jittered by ±10% so that repositories spread
// their polls.
type Round struct {
	n         int
	next      time.Time
	minPeriod time.Duration // of this round's keys, for the next
}

// Join notes a key whose own period is p, starts the next round when it
// is due at now (every, when set, replaces the jittered period), and
// returns the current round's number; the first is 1.
func (r *Round) Join(now time.Time, p, every time.Duration) int {
	if r.minPeriod == 0 || p < r.minPeriod {
		r.minPeriod = p
	}
	if !now.Before(r.next) {
		period := cmp.Or(every, jitter(r.minPeriod))
		r.n, r.next, r.minPeriod = r.n+1, now.Add(period), 0
	}
	return r.n
}

// N is the current round's number (0 before the first).
func (r *Round) N() int { return r.n }

// Until is how long after now the next round starts, at least 1ms.
func (r *Round) Until(now time.Time) time.Duration { return max(r.next.Sub(now), time.Millisecond) }

// jitter is p ±10%.
func jitter(p time.Duration) time.Duration {
	return p + time.Duration((rand.Float64()*0.2-0.1)*float64(p))
}

// Waves counts, per group, the busy keys of each sync wave: a key of a
// higher wave waits while a lower wave of its group has a busy key.
type Waves[K comparable] struct {
	busy  map[K]waveKey
	count map[waveKey]int
}

type waveKey struct {
	group string
	wave  int
}

// Set records whether k, of group at wave, is busy, and reports whether
// it was busy before.
func (w *Waves[K]) Set(k K, group string, wave int, busy bool) (was bool) {
	old, was := w.busy[k]
	if was {
		if w.count[old]--; w.count[old] == 0 {
			delete(w.count, old)
		}
		delete(w.busy, k)
	}
	if busy {
		if w.busy == nil {
			w.busy, w.count = map[K]waveKey{}, map[waveKey]int{}
		}
		key := waveKey{group, wave}
		w.busy[k] = key
		w.count[key]++
	}
	return was
}

// Holding returns the lowest wave of group below wave that has a busy
// key.
func (w *Waves[K]) Holding(group string, wave int) (int, bool) {
	lowest, found := 0, false
	for key := range maps.Keys(w.count) {
		if key.group == group && key.wave < wave && (!found || key.wave < lowest) {
			lowest, found = key.wave, true
		}
	}
	return lowest, found
}

// Sooner is the sooner of two waits, where one of zero or less is none:
// none only when both are.
func Sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
