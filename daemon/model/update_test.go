package model

import (
	"testing"
	"time"
)

// check is a finished, in-sync drift check of stack app.
func check(seq uint64) Update {
	return Update{
		ID: UpdateID("app", seq), Stack: "app", Seq: seq, Type: UpdateDrift, Reason: "Drift check",
		Commit: "abc", Generation: 2, State: UpdateSucceeded, Changes: map[string]int{"same": 2},
		StartTime: time.Date(2025, 3, 1, 12, int(seq), 0, 0, time.UTC),
	}
}

func TestFolds(t *testing.T) {
	with := func(seq uint64, f func(*Update)) Update {
		u := check(seq)
		f(&u)
		return u
	}
	for _, c := range []struct {
		name       string
		prev, next Update
		want       bool
	}{
		{"identical checks", check(1), check(2), true},
		{"an earlier fold", with(1, func(u *Update) { u.Checks = 5 }), check(2), true},
		{"both failed alike", with(1, func(u *Update) { u.State, u.Message = UpdateFailed, "boom" }),
			with(2, func(u *Update) { u.State, u.Message = UpdateFailed, "boom" }), true},
		{"nil and empty changes", with(1, func(u *Update) { u.Changes = nil }), with(2, func(u *Update) { u.Changes = map[string]int{} }), true},
		{"another node and permalink", with(1, func(u *Update) { u.Node = "n1" }), with(2, func(u *Update) { u.Node, u.Permalink = "n2", "x" }), true},
		{"prev an up", with(1, func(u *Update) { u.Type = UpdateUp }), check(2), false},
		{"next a refresh", check(1), with(2, func(u *Update) { u.Type = UpdateRefresh }), false},
		{"prev running", with(1, func(u *Update) { u.State = UpdateRunning }), with(2, func(u *Update) { u.State = UpdateRunning }), false},
		{"next running", check(1), with(2, func(u *Update) { u.State = UpdateRunning }), false},
		{"another state", check(1), with(2, func(u *Update) { u.State = UpdateFailed }), false},
		{"another commit", check(1), with(2, func(u *Update) { u.Commit = "def" }), false},
		{"another generation", check(1), with(2, func(u *Update) { u.Generation = 3 }), false},
		{"another message", with(1, func(u *Update) { u.State, u.Message = UpdateFailed, "a" }),
			with(2, func(u *Update) { u.State, u.Message = UpdateFailed, "b" }), false},
		{"other changes", check(1), with(2, func(u *Update) { u.Changes = map[string]int{"same": 1, "update": 1} }), false},
		{"a pull request", with(1, func(u *Update) { u.PullRequest = 4 }), with(2, func(u *Update) { u.PullRequest = 4 }), false},
		{"another stack", with(1, func(u *Update) { u.Stack = "web" }), check(2), false},
		{"prev not older", check(2), check(2), false},
	} {
		if got := Folds(c.prev, c.next); got != c.want {
			t.Errorf("%s: Folds = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFold(t *testing.T) {
	first, second, third := check(1), check(2), check(3)
	two := Fold(first, second)
	if two.ID != second.ID || two.Checks != 2 || !two.FirstStartTime.Equal(first.StartTime) || !two.StartTime.Equal(second.StartTime) {
		t.Errorf("Fold(1, 2) = %+v", two)
	}
	three := Fold(two, third)
	if three.ID != third.ID || three.Checks != 3 || !three.FirstStartTime.Equal(first.StartTime) {
		t.Errorf("Fold(Fold(1, 2), 3) = %+v", three)
	}
	if n := (Update{}).CheckCount(); n != 1 {
		t.Errorf("CheckCount of a plain record = %d, want 1", n)
	}
}
