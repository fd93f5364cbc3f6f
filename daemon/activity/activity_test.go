package activity

import (
	"errors"
	"testing"
	"time"
)

// TestNext holds the whole table: every event in every phase, the
// refused ones included.
func TestNext(t *testing.T) {
	const no = Phase(255) // refused
	want := map[Phase]map[Event]Phase{
		Idle:           {Poll: Polling, Polled: no, Settle: Idle, Want: Waiting, Start: Running, End: no, Preview: Idle, Previewed: Idle},
		Waiting:        {Poll: WaitingPolling, Polled: no, Settle: Idle, Want: Waiting, Start: Running, End: no, Preview: Waiting, Previewed: Waiting},
		Polling:        {Poll: no, Polled: Idle, Settle: no, Want: no, Start: no, End: no, Preview: Polling, Previewed: Polling},
		WaitingPolling: {Poll: no, Polled: Waiting, Settle: no, Want: no, Start: no, End: no, Preview: WaitingPolling, Previewed: WaitingPolling},
		Running:        {Poll: no, Polled: no, Settle: no, Want: no, Start: no, End: Idle, Preview: Running, Previewed: Running},
	}
	for p := Idle; p <= Running; p++ {
		for e := Poll; e <= Previewed; e++ {
			w, listed := want[p][e]
			if !listed {
				t.Fatalf("the test lists no outcome of %s in %s", e, p)
			}
			got, ok := Next(p, e)
			switch {
			case w == no && (ok || got != p):
				t.Errorf("%s in %s: got %s, %t; want refused, %s kept", e, p, got, ok, p)
			case w != no && (!ok || got != w):
				t.Errorf("%s in %s: got %s, %t; want %s", e, p, got, ok, w)
			}
		}
	}
}

// TestDo: a refused event leaves the state as it was and says why.
func TestDo(t *testing.T) {
	var s State
	steps := []struct {
		e      Event
		phase  Phase
		refuse bool
	}{
		{Want, Waiting, false},
		{Poll, WaitingPolling, false},
		{Start, WaitingPolling, true}, // no operation while polling
		{Poll, WaitingPolling, true},
		{Polled, Waiting, false},
		{Start, Running, false},
		{Settle, Running, true}, // an evaluation does not end an operation
		{Poll, Running, true},
		{End, Idle, false},
		{End, Idle, true},
		{Polled, Idle, true},
		{Poll, Polling, false},
		{Polled, Idle, false},
		{Start, Running, false}, // a drift check starts from idle
	}
	for i, st := range steps {
		err := s.Do(st.e)
		var refused *RefusedError
		if st.refuse != errors.As(err, &refused) || (st.refuse && (refused.From != st.phase || refused.Event != st.e)) {
			t.Fatalf("step %d (%s): err %v, refused %t", i, st.e, err, st.refuse)
		}
		if s.Phase() != st.phase {
			t.Fatalf("step %d (%s): phase %s, want %s", i, st.e, s.Phase(), st.phase)
		}
	}
	if msg := (&RefusedError{From: Running, Event: Poll}).Error(); msg != "a stack cannot poll while running" {
		t.Errorf("message %q", msg)
	}
}

func TestQueries(t *testing.T) {
	for _, c := range []struct {
		p                         Phase
		running, polling, waiting bool
	}{
		{Idle, false, false, false},
		{Waiting, false, false, true},
		{Polling, false, true, false},
		{WaitingPolling, false, true, true},
		{Running, true, false, false},
	} {
		s := State{phase: c.p}
		if s.Running() != c.running || s.Polling() != c.polling || s.Waiting() != c.waiting {
			t.Errorf("%s: running %t polling %t waiting %t", c.p, s.Running(), s.Polling(), s.Waiting())
		}
	}
	if Phase(9).String() != "Phase(9)" || Event(9).String() != "Event(9)" {
		t.Error("unknown phases and events print their number")
	}
}

// TestPreview: one preview at a time, in any phase, which it keeps;
// ending none is refused.
func TestPreview(t *testing.T) {
	for p := Idle; p <= Running; p++ {
		s := State{phase: p}
		if err := s.Do(Previewed); err == nil || err.Error() != "a stack cannot end a preview while none runs" {
			t.Errorf("%s: ended a preview that was not running: %v", p, err)
		}
		if err := s.Do(Preview); err != nil || !s.Previewing() {
			t.Errorf("%s: begin: %v", p, err)
		}
		if err := s.Do(Preview); err == nil || err.Error() != "a stack cannot preview while a preview runs" || !s.Previewing() {
			t.Errorf("%s: a second preview: %v", p, err)
		}
		if err := s.Do(Previewed); err != nil || s.Previewing() || s.Phase() != p {
			t.Errorf("%s: end: %v, previewing %t, phase %s", p, err, s.Previewing(), s.Phase())
		}
	}
	var s State
	for _, e := range []Event{Want, Preview, Start, Previewed, End} { // a preview beside an update
		if err := s.Do(e); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
	}
}

func TestBlock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s State
	if s.Blocked() || s.BlockedFor(now) != 0 {
		t.Fatal("a new state is blocked")
	}
	s.Block(now.Add(30 * time.Second))
	if !s.Blocked() || s.BlockedFor(now) != 30*time.Second {
		t.Fatalf("blocked %t for %s", s.Blocked(), s.BlockedFor(now))
	}
	if d := s.BlockedFor(now.Add(30 * time.Second)); d != 0 || !s.Blocked() {
		t.Fatalf("at its retry: %s, blocked %t (it stays blocked until cleared)", d, s.Blocked())
	}
	s.Unblock()
	if s.Blocked() || s.BlockedFor(now) != 0 {
		t.Fatal("still blocked")
	}
}
