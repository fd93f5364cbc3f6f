package cluster

import (
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

// finishedCheck begins a drift check of stack app and records it
// finished, unchanged.
func finishedCheck(t *testing.T, r *replica, start time.Time) model.Update {
	t.Helper()
	u, err := r.BeginUpdate(model.Update{Stack: "app", Type: model.UpdateDrift, Commit: "abc", StartTime: start, State: model.UpdateRunning})
	if err != nil {
		t.Fatal(err)
	}
	u.State, u.Changes = model.UpdateSucceeded, map[string]int{"same": 1}
	return u
}

// TestDriftFoldAbortsOnChange: a fold whose previous record changed
// after it was read deletes nothing and writes nothing; PutUpdate then
// decides again on what etcd holds.
func TestDriftFoldAbortsOnChange(t *testing.T) {
	eps := etcd(t)
	r := join(t, eps, newPrefix(), "node-1", Options{})
	r.SetStacks([]string{"app"})
	eventually(t, "holding app", func() bool { return r.Holds("app") })
	first := finishedCheck(t, r, storetest.T0)
	if err := r.PutUpdate(first); err != nil {
		t.Fatal(err)
	}
	if err := r.PutLog(first.ID, []byte("first")); err != nil {
		t.Fatal(err)
	}
	second := finishedCheck(t, r, storetest.T0.Add(time.Minute))
	prev, err := r.previousUpdate(second)
	if err != nil || prev.rev == 0 || prev.u.ID != first.ID {
		t.Fatalf("previousUpdate = %+v, %v; want %s", prev, err, first.ID)
	}
	// Meanwhile the first check's record changes.
	first.Message = "changed meanwhile"
	if err := r.PutUpdate(first); err != nil {
		t.Fatal(err)
	}
	f, err := r.stackFence("app")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.putFolded(f, prev, second); ok || err != nil {
		t.Fatalf("putFolded over a changed record = %v, %v; want false, nil", ok, err)
	}
	if got, err := r.Update(first.ID); err != nil || got.Message != "changed meanwhile" {
		t.Errorf("Update(%s) = %+v, %v; want the changed record kept", first.ID, got, err)
	}
	if log, err := r.Log(first.ID); err != nil || string(log) != "first" {
		t.Errorf("Log(%s) = %q, %v; want it kept", first.ID, log, err)
	}
	if got, _ := r.Update(second.ID); got.State != model.UpdateRunning {
		t.Errorf("Update(%s) = %+v; want it still as begun", second.ID, got)
	}
	// Written again, it no longer folds: the outcomes differ now.
	if err := r.PutUpdate(second); err != nil {
		t.Fatal(err)
	}
	us, err := r.Updates("app", 0, 0)
	if err != nil || len(us) != 2 || us[0].Checks != 0 || us[1].Message != "changed meanwhile" {
		t.Errorf("Updates = %+v, %v; want both checks, unfolded", us, err)
	}
	// A fold of an update that was pruned meanwhile is ErrNotFound.
	third := finishedCheck(t, r, storetest.T0.Add(2*time.Minute))
	third.Seq = 99
	storetest.WantNotFound(t, "putFolded of a missing update", func() error {
		_, err := r.putFolded(f, storedUpdate{u: second, key: r.updateKey("app", second.Seq), rev: 1}, third)
		return err
	}())
}
