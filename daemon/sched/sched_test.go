package sched

import (
	"slices"
	"testing"
	"time"
)

func TestQueue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var q Queue[string]
	if got := q.Take(t0); len(got) != 0 {
		t.Fatalf("empty queue took %v", got)
	}
	q.SetDue("a", t0.Add(2*time.Second))
	q.SetDue("b", t0.Add(time.Second))
	q.SetDue("c", t0.Add(3*time.Second))
	q.SetDue("c", t0.Add(5*time.Second)) // moved: the earlier entry is stale
	q.MarkDirty("d")
	q.MarkDirty("b") // dirty and due: taken once
	if !q.Dirty() {
		t.Fatal("not dirty")
	}
	if got := sorted(q.Take(t0)); !slices.Equal(got, []string{"b", "d"}) {
		t.Fatalf("at t0: %v", got)
	}
	if next, ok := q.Next(t0); !ok || next != 2*time.Second {
		t.Fatalf("next = %v %t", next, ok) // b was taken: its due time went with it
	}
	if got := q.Take(t0.Add(3 * time.Second)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("at +3s: %v (c moved to +5s)", got)
	}
	q.SetDue("e", t0.Add(4*time.Second))
	q.Forget("e")
	q.SetDue("f", t0.Add(4*time.Second))
	q.SetDue("f", time.Time{}) // due never
	if got := q.Take(t0.Add(10 * time.Second)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("at +10s: %v", got)
	}
	if _, ok := q.Next(t0); ok || q.Dirty() {
		t.Fatal("something is left")
	}
	q.MarkDirty("g")
	q.Clean("g")
	if q.Dirty() {
		t.Fatal("cleaned key still dirty")
	}
}

func TestWaves(t *testing.T) {
	var w Waves[string]
	if _, held := w.Holding("src", 5); held {
		t.Fatal("held with nothing busy")
	}
	w.Set("net", "src", 0, true)
	w.Set("db", "src", 1, true)
	w.Set("other", "elsewhere", -3, true)
	for _, tc := range []struct {
		wave   int
		lowest int
		held   bool
	}{{0, 0, false}, {1, 0, true}, {2, 0, true}} {
		if lowest, held := w.Holding("src", tc.wave); lowest != tc.lowest || held != tc.held {
			t.Errorf("wave %d: %d %t; want %d %t", tc.wave, lowest, held, tc.lowest, tc.held)
		}
	}
	if was := w.Set("net", "src", 0, false); !was {
		t.Error("net was busy")
	}
	if lowest, held := w.Holding("src", 2); lowest != 1 || !held {
		t.Errorf("after net: %d %t", lowest, held)
	}
	w.Set("db", "src", 3, true) // moved to another wave
	if _, held := w.Holding("src", 2); held {
		t.Error("db still counted at its old wave")
	}
	if was := w.Set("gone", "", 0, false); was {
		t.Error("an unknown key was busy")
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestRound: the keys that join a round share it; the next starts after
// the shortest period among them (jittered ±10%, or every).
func TestRound(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r Round
	if r.N() != 0 {
		t.Fatalf("a new round is %d", r.N())
	}
	steps := []struct {
		at     time.Duration
		period time.Duration
		want   int
	}{
		{0, time.Minute, 1},                     // due at once: round 1 starts, next after a minute ±10%
		{time.Second, 30 * time.Second, 1},      // joins round 1; the next round takes its 30s
		{50 * time.Second, 5 * time.Minute, 1},  // within round 1's minute: no new round
		{70 * time.Second, 5 * time.Minute, 2},  // round 1's minute ±10% is over
		{80 * time.Second, 10 * time.Minute, 2}, // round 2 follows the 30s of round 1's keys: not before 97s
	}
	for _, s := range steps {
		if got := r.Join(t0.Add(s.at), s.period, 0); got != s.want || r.N() != s.want {
			t.Fatalf("at %s: round %d (N %d), want %d", s.at, got, r.N(), s.want)
		}
	}
	if u := r.Until(t0.Add(80 * time.Second)); u < 17*time.Second || u > 23*time.Second {
		t.Fatalf("next round in %s, want 20s ±10%% of 30s", u)
	}
	if u := r.Until(t0.Add(time.Hour)); u != time.Millisecond {
		t.Fatalf("an overdue round is %s away, want 1ms", u)
	}
	var fixed Round
	fixed.Join(t0, time.Hour, time.Second)
	if u := fixed.Until(t0); u != time.Second {
		t.Fatalf("with every set the period is %s", u)
	}
}

func TestSooner(t *testing.T) {
	for _, c := range []struct{ a, b, want time.Duration }{
		{0, 0, 0}, {0, time.Second, time.Second}, {time.Second, 0, time.Second}, {-time.Second, time.Second, time.Second},
		{2 * time.Second, time.Second, time.Second}, {time.Second, 2 * time.Second, time.Second},
	} {
		if got := Sooner(c.a, c.b); got != c.want {
			t.Errorf("Sooner(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
