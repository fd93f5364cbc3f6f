// Package activity is what one stack is doing in the reconcile loop, as
// one state with explicit transitions: its phase (idle, polling its
// branch, waiting to run, running an operation), a "preview now" beside
// it, and a block until a time after its source or references could not
// be read. A transition that cannot happen from the current state is
// refused and changes nothing. It is pure and not safe for concurrent
// use: the loop holds its lock.
package activity

import (
	"fmt"
	"time"
)

// Phase is the one thing a stack's work is at; the phases exclude each
// other.
type Phase uint8

const (
	// Idle: nothing in flight, and the last evaluation found nothing the
	// stack could not start (or it was not evaluated yet).
	Idle Phase = iota
	// Waiting: the stack wants to run and cannot start yet (a gate, a
	// prerequisite, a sync wave, a closed window, no free worker).
	Waiting
	// Polling: the stack's branch is being resolved; it was idle.
	Polling
	// WaitingPolling: the branch is being resolved while the stack waits
	// to run; it still counts as waiting, and waits again when the poll
	// ends.
	WaitingPolling
	// Running: an operation (an update, a destroy, a drift check) is in
	// flight.
	Running
)

var phaseNames = [...]string{"idle", "waiting", "polling", "waiting-polling", "running"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", p)
}

// Event is what happens to a stack's phase.
type Event uint8

const (
	// Poll: a resolve of the stack's branch starts.
	Poll Event = iota
	// Polled: that resolve ended, whatever its outcome.
	Polled
	// Settle: an evaluation looks at the stack anew; it no longer waits
	// unless Want says so again.
	Settle
	// Want: the stack wants to run; it waits until Start.
	Want
	// Start: an operation starts (from Waiting; a drift check from Idle).
	Start
	// End: the operation ended, whatever its outcome.
	End
	// Preview: a "preview now" begins, in any phase; refused while one
	// runs.
	Preview
	// Previewed: it ended.
	Previewed
)

var eventNames = [...]string{"poll", "polled", "settle", "want", "start", "end", "preview", "end a preview"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", e)
}

// Next is the transition table: the phase e leads to from p; ok is false
// when e cannot happen in p (a poll or an operation already in flight, an
// end of what is not running). A preview's events keep the phase.
func Next(p Phase, e Event) (next Phase, ok bool) {
	switch {
	case e == Preview || e == Previewed:
		return p, true
	case e == Poll && p == Idle:
		return Polling, true
	case e == Poll && p == Waiting:
		return WaitingPolling, true
	case e == Polled && p == Polling:
		return Idle, true
	case e == Polled && p == WaitingPolling:
		return Waiting, true
	case e == Settle && (p == Idle || p == Waiting):
		return Idle, true
	case e == Want && (p == Idle || p == Waiting):
		return Waiting, true
	case e == Start && (p == Idle || p == Waiting):
		return Running, true
	case e == End && p == Running:
		return Idle, true
	}
	return p, false
}

// RefusedError is a transition the state refused: Event in phase From,
// or a preview's event refused because Previewing says otherwise.
type RefusedError struct {
	From       Phase
	Event      Event
	Previewing bool
}

func (e *RefusedError) Error() string {
	switch {
	case e.Event == Preview && e.Previewing:
		return "a stack cannot preview while a preview runs"
	case e.Event == Previewed && !e.Previewing:
		return "a stack cannot end a preview while none runs"
	}
	return fmt.Sprintf("a stack cannot %s while %s", e.Event, e.From)
}

// State is one stack's activity. Its zero value is idle, previews
// nothing and is not blocked.
//
// The preview and the block are beside the phase, not phases of their
// own: a "preview now" needs no worker and changes nothing of the stack,
// so it runs whatever the phase (but one at a time); a block is set when
// a poll or an operation's preparation fails and cleared by a new spec, a
// sync, a reachable source or an update that begins, in any phase.
type State struct {
	phase      Phase
	previewing bool
	blocked    bool
	retryAt    time.Time
}

// Phase is the stack's phase.
func (s *State) Phase() Phase { return s.phase }

// Do applies e, or refuses it and changes nothing.
func (s *State) Do(e Event) error {
	next, ok := Next(s.phase, e)
	switch e {
	case Preview:
		ok = !s.previewing
	case Previewed:
		ok = s.previewing
	}
	if !ok {
		return &RefusedError{From: s.phase, Event: e, Previewing: s.previewing}
	}
	s.phase = next
	if e == Preview || e == Previewed {
		s.previewing = e == Preview
	}
	return nil
}

// Running says whether an operation is in flight.
func (s *State) Running() bool { return s.phase == Running }

// Polling says whether the stack's branch is being resolved.
func (s *State) Polling() bool { return s.phase == Polling || s.phase == WaitingPolling }

// Waiting says whether the stack wants to run and cannot start yet (a
// poll meanwhile included).
func (s *State) Waiting() bool { return s.phase == Waiting || s.phase == WaitingPolling }

// Previewing says whether a "preview now" of the stack runs.
func (s *State) Previewing() bool { return s.previewing }

// Block marks the stack blocked (Stalled, its source or a reference
// unreadable) until retryAt, when it is tried again.
func (s *State) Block(retryAt time.Time) { s.blocked, s.retryAt = true, retryAt }

// Unblock clears the block: something changed that may let it run.
func (s *State) Unblock() { s.blocked = false }

// Blocked says whether the stack is blocked, whether or not its retry is
// due.
func (s *State) Blocked() bool { return s.blocked }

// BlockedFor is how long until a blocked stack is tried again at now;
// 0 when it is not blocked or its retry is due.
func (s *State) BlockedFor(now time.Time) time.Duration {
	if !s.blocked || !now.Before(s.retryAt) {
		return 0
	}
	return s.retryAt.Sub(now)
}
