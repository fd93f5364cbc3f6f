package decide

import (
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const sha, oldSHA = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	base := Observation{Now: now, Generation: 2, ReconcileRequest: "r1", Commit: sha, ResyncPeriod: time.Minute}
	with := func(f func(*Observation)) Observation {
		o := base
		f(&o)
		return o
	}
	succeeded := func(f func(*model.LastUpdate)) *model.LastUpdate {
		l := &model.LastUpdate{Generation: 2, ReconcileRequest: "r1", Type: model.UpdateUp, State: model.UpdateSucceeded,
			LastAttemptedCommit: sha, LastSuccessfulCommit: sha, LastResyncTime: now.Add(-10 * time.Second)}
		if f != nil {
			f(l)
		}
		return l
	}
	failed := func(failures int64, f func(*model.LastUpdate)) *model.LastUpdate {
		return succeeded(func(l *model.LastUpdate) {
			l.State, l.Failures, l.LastSuccessfulCommit = model.UpdateFailed, failures, oldSHA
			if f != nil {
				f(l)
			}
		})
	}
	removed := func(o *Observation) { o.Removed, o.DestroyOnRemoval = true, true }

	tests := []struct {
		name string
		last *model.LastUpdate
		obs  Observation
		want Decision
	}{
		// Removal without destroy, before the table (PKO step 2).
		{"removed, no destroyOnFinalize", succeeded(nil), with(func(o *Observation) { o.Removed = true }), Decision{Finalize: true}},
		{"removed preview stack never destroys", succeeded(nil), with(func(o *Observation) { removed(o); o.Preview = true }), Decision{Finalize: true}},
		// PKO destroys a stack it never deployed too: it may exist in the
		// backend from before.
		{"removed, never deployed, destroyOnFinalize", nil, with(removed), Decision{Run: true, Type: model.UpdateDestroy, Reason: "Stack marked for deletion"}},
		{"removed, never deployed", nil, with(func(o *Observation) { o.Removed = true }), Decision{Finalize: true}},
		// Row 1.
		{"1 initial update", nil, base, Decision{Run: true, Type: model.UpdateUp, Reason: "Initial stack update"}},
		{"1 initial preview", nil, with(func(o *Observation) { o.Preview = true }), Decision{Run: true, Type: model.UpdatePreview, Reason: "Initial stack update"}},
		// Row 2.
		{"2 new generation", succeeded(func(l *model.LastUpdate) { l.Generation = 1 }), base, Decision{Run: true, Type: model.UpdateUp, Reason: "New stack generation: 2"}},
		{"2 new generation while removed", succeeded(func(l *model.LastUpdate) { l.Generation = 1 }), with(removed), Decision{Run: true, Type: model.UpdateDestroy, Reason: "Stack marked for deletion"}},
		// Row 3.
		{"3 sync request", succeeded(func(l *model.LastUpdate) { l.ReconcileRequest = "r0" }), base, Decision{Run: true, Type: model.UpdateUp, Reason: `Sync request: "r1"`}},
		{"3 sync request after stall", failed(3, func(l *model.LastUpdate) { l.ReconcileRequest = "r0" }), base, Decision{Run: true, Type: model.UpdateUp, Reason: `Sync request: "r1"`}},
		// Row 4: after a success.
		{"4a destroyed, finalize", succeeded(func(l *model.LastUpdate) { l.Type = model.UpdateDestroy }), with(removed), Decision{Finalize: true}},
		{"4b removed, destroy", succeeded(nil), with(removed), Decision{Run: true, Type: model.UpdateDestroy, Reason: "Stack marked for deletion"}},
		{"4c new commit", succeeded(func(l *model.LastUpdate) { l.LastSuccessfulCommit = oldSHA }), base, Decision{Run: true, Type: model.UpdateUp, Reason: `New commit detected: "` + sha + `"`, NewCommit: true}},
		{"4c' new commit that changes nothing under paths", succeeded(func(l *model.LastUpdate) { l.LastSuccessfulCommit = oldSHA }),
			with(func(o *Observation) { o.SkippedCommit = sha }), Decision{}},
		{"4c'' another new commit after a skipped one", succeeded(func(l *model.LastUpdate) { l.LastSuccessfulCommit = oldSHA }),
			with(func(o *Observation) { o.SkippedCommit = "3333333333333333333333333333333333333333" }), Decision{Run: true, Type: model.UpdateUp, Reason: `New commit detected: "` + sha + `"`, NewCommit: true}},
		{"4c unknown commit is no change", succeeded(nil), with(func(o *Observation) { o.Commit = "" }), Decision{}},
		{"4d synced", succeeded(nil), base, Decision{}},
		{"4e resync elapsed", succeeded(func(l *model.LastUpdate) { l.LastResyncTime = now.Add(-time.Minute) }), with(func(o *Observation) { o.ContinueResync = true }),
			Decision{Run: true, Type: model.UpdateUp, Reason: "Resync time elapsed: 1m0s"}},
		{"4e resync pending", succeeded(nil), with(func(o *Observation) { o.ContinueResync = true }), Decision{RecheckAfter: 50 * time.Second}},
		{"4e preview resync", succeeded(func(l *model.LastUpdate) { l.LastResyncTime = now.Add(-2 * time.Minute) }), with(func(o *Observation) { o.ContinueResync, o.Preview = true, true }),
			Decision{Run: true, Type: model.UpdatePreview, Reason: "Resync time elapsed: 1m0s"}},
		// Row 5: after a failure.
		{"5a new commit after failure", failed(2, func(l *model.LastUpdate) { l.LastAttemptedCommit = oldSHA }), base, Decision{Run: true, Type: model.UpdateUp, Reason: `New commit detected: "` + sha + `"`}},
		{"5b stalled", failed(3, nil), base, Decision{Stalled: true}},
		{"5b stall limit from flag", failed(1, nil), with(func(o *Observation) { o.MaxFailures = 1 }), Decision{Stalled: true}},
		// Failures counts failed updates, 1 for the first; the n-th waits
		// 10s·3^(n-1).
		{"5c backoff elapsed", failed(2, func(l *model.LastUpdate) { l.LastResyncTime = now.Add(-30 * time.Second) }), base, Decision{Run: true, Type: model.UpdateUp, Reason: "Backoff time elapsed: 30s"}},
		{"5c backoff pending", failed(2, nil), base, Decision{RecheckAfter: 20 * time.Second}},
		{"5c first failure waits 10s", failed(1, func(l *model.LastUpdate) { l.LastResyncTime = now.Add(-9500 * time.Millisecond) }), base, Decision{RecheckAfter: time.Second}},
		{"5c capped backoff", failed(2, func(l *model.LastUpdate) { l.LastResyncTime = now.Add(-15 * time.Second) }), with(func(o *Observation) { o.MaxBackoff = 15 * time.Second }),
			Decision{Run: true, Type: model.UpdateUp, Reason: "Backoff time elapsed: 15s"}},
		{"5 failed destroy retries", failed(2, func(l *model.LastUpdate) { l.Type = model.UpdateDestroy; l.LastResyncTime = now.Add(-time.Minute) }), with(func(o *Observation) { removed(o); o.Commit = "" }),
			Decision{Run: true, Type: model.UpdateDestroy, Reason: "Backoff time elapsed: 30s"}},
		{"5 failed destroy stalls", failed(3, func(l *model.LastUpdate) { l.Type = model.UpdateDestroy }), with(removed), Decision{Stalled: true}},
		{"5 removal ignores commits", failed(3, func(l *model.LastUpdate) { l.LastAttemptedCommit = oldSHA }), with(removed), Decision{Stalled: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.last, tt.obs); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	m := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// PKO's table (pko-stack-semantics §2.4).
	for failures, want := range []string{"10s", "30s", "90s", "4m30s", "13m30s", "40m30s", "2h1m30s", "6h4m30s", "18h13m30s", "24h", "24h"} {
		if got := Backoff(int64(failures), 0); got != m(want) {
			t.Errorf("Backoff(%d) = %v, want %s", failures, got, want)
		}
	}
	for _, tt := range []struct {
		failures int64
		limit    time.Duration
		want     time.Duration
	}{{0, 5 * time.Second, 10 * time.Second}, {1, time.Minute, 30 * time.Second}, {2, time.Minute, time.Minute}, {60, time.Hour, time.Hour}} {
		if got := Backoff(tt.failures, tt.limit); got != tt.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", tt.failures, tt.limit, got, tt.want)
		}
	}
}

func TestNextFailures(t *testing.T) {
	last := &model.LastUpdate{Generation: 3, ReconcileRequest: "a", State: model.UpdateFailed, LastAttemptedCommit: "c1", Failures: 2}
	for _, tt := range []struct {
		name        string
		last        *model.LastUpdate
		gen         int64
		req, commit string
		want        int64
	}{
		{"no previous update", nil, 3, "a", "c1", 1},
		{"same generation, request and commit", last, 3, "a", "c1", 3},
		{"new generation restarts", last, 4, "a", "c1", 1},
		{"new sync request restarts", last, 3, "b", "c1", 1},
		{"new commit restarts", last, 3, "a", "c2", 1},
		{"after a success at the same generation", &model.LastUpdate{Generation: 3, ReconcileRequest: "a", State: model.UpdateSucceeded, LastAttemptedCommit: "c1"}, 3, "a", "c1", 1},
	} {
		if got := NextFailures(tt.last, tt.gen, tt.req, tt.commit); got != tt.want {
			t.Errorf("%s: NextFailures = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestResyncPeriod(t *testing.T) {
	for _, tt := range []struct {
		seconds int64
		floor   time.Duration
		want    time.Duration
	}{{0, time.Minute, time.Minute}, {30, time.Minute, time.Minute}, {300, time.Minute, 5 * time.Minute}, {2, time.Second, 2 * time.Second}, {0, time.Second, time.Minute}} {
		if got := ResyncPeriod(&spec.StackSpec{ResyncFrequencySeconds: tt.seconds}, tt.floor); got != tt.want {
			t.Errorf("ResyncPeriod(%d, floor %v) = %v, want %v", tt.seconds, tt.floor, got, tt.want)
		}
	}
}
