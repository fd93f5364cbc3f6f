package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// runCheck records a drift check of stack as the daemon does: begun
// running, then finished in state with changes, then its log.
func runCheck(t *testing.T, s daemon.Store, stack, state string, changes map[string]int, start time.Time) model.Update {
	t.Helper()
	u, err := s.BeginUpdate(model.Update{Stack: stack, Type: model.UpdateDrift, Reason: "Drift check",
		Commit: "abc123", Generation: 1, StartTime: start, State: model.UpdateRunning})
	if err != nil {
		t.Fatalf("begin check: %v", err)
	}
	u.State, u.EndTime, u.Changes = state, start.Add(time.Second), changes
	if state == model.UpdateFailed {
		u.Message = "backend unreachable"
	}
	if err := s.PutUpdate(u); err != nil {
		t.Fatalf("finish check %s: %v", u.ID, err)
	}
	if err := s.PutLog(u.ID, []byte("log of "+u.ID)); err != nil {
		t.Fatalf("log of check %s: %v", u.ID, err)
	}
	return u
}

// wantHistory fails t unless stack's history is want: seq → checks.
func wantHistory(t *testing.T, s daemon.Store, stack string, want [][2]uint64) []model.Update {
	t.Helper()
	us, err := s.Updates(stack, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]uint64
	for _, u := range us {
		got = append(got, [2]uint64{u.Seq, uint64(u.Checks)})
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history (seq, checks) = %v, want %v", got, want)
	}
	return us
}

// testDriftFold: a finished drift check whose outcome is that of the
// record before it absorbs that record, so that a deploy outlives any
// number of unchanged checks under the history limit.
func testDriftFold(t *testing.T, open Factory) {
	s, hold := open(t, Limits{History: 100})
	hold("app")
	up := begin(t, s, "app")
	up.State = model.UpdateSucceeded
	if err := s.PutUpdate(up); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLog(up.ID, []byte("deployed")); err != nil {
		t.Fatal(err)
	}
	same := map[string]int{"same": 2}
	var last model.Update
	for i := range 150 {
		last = runCheck(t, s, "app", model.UpdateSucceeded, same, T0.Add(time.Duration(i+1)*time.Minute))
	}
	us := wantHistory(t, s, "app", [][2]uint64{{151, 150}, {1, 0}})
	if f := us[0]; !f.FirstStartTime.Equal(T0.Add(time.Minute)) || !f.StartTime.Equal(last.StartTime) || f.ID != last.ID {
		t.Errorf("folded record = %+v; want the last check, first started at %v", f, T0.Add(time.Minute))
	}
	if log, err := s.Log(up.ID); err != nil || string(log) != "deployed" {
		t.Errorf("Log(%s) = %q, %v; the deploy's log is gone", up.ID, log, err)
	}
	if log, err := s.Log(last.ID); err != nil || string(log) != "log of "+last.ID {
		t.Errorf("Log(%s) = %q, %v", last.ID, log, err)
	}
	for _, seq := range []uint64{2, 150} {
		id := model.UpdateID("app", seq)
		_, err := s.Update(id)
		WantNotFound(t, "Update("+id+") of a folded check", err)
		_, err = s.Log(id)
		WantNotFound(t, "Log("+id+") of a folded check", err)
	}

	// Another outcome starts a record of its own, which the next
	// identical check folds into, leaving the others be.
	drifted := map[string]int{"same": 1, "update": 1}
	runCheck(t, s, "app", model.UpdateSucceeded, drifted, T0.Add(200*time.Minute))
	runCheck(t, s, "app", model.UpdateSucceeded, drifted, T0.Add(201*time.Minute))
	runCheck(t, s, "app", model.UpdateFailed, nil, T0.Add(202*time.Minute))
	wantHistory(t, s, "app", [][2]uint64{{154, 0}, {153, 2}, {151, 150}, {1, 0}})

	// A check that is still running, and an update between two checks,
	// fold nothing.
	u, err := s.BeginUpdate(model.Update{Stack: "app", Type: model.UpdateDrift, State: model.UpdateRunning, Commit: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	begin(t, s, "app")
	runCheck(t, s, "app", model.UpdateFailed, nil, T0.Add(203*time.Minute))
	wantHistory(t, s, "app", [][2]uint64{{157, 0}, {156, 0}, {u.Seq, 0}, {154, 0}, {153, 2}, {151, 150}, {1, 0}})
}

// testDriftFoldStacks: a check folds only its own stack's records.
func testDriftFoldStacks(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	holdAll(hold, "a", "a-b")
	for i := range 3 {
		for _, stack := range []string{"a", "a-b"} {
			runCheck(t, s, stack, model.UpdateSucceeded, nil, T0.Add(time.Duration(i)*time.Minute))
		}
	}
	for _, stack := range []string{"a", "a-b"} {
		t.Run(fmt.Sprint(stack), func(t *testing.T) { wantHistory(t, s, stack, [][2]uint64{{3, 3}}) })
	}
}
