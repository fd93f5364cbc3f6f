package daemon

import (
	"slices"
	"testing"
)

// TestStoppingReportsWhatTheStopWaitsFor: once the process's stop began
// (Stopping, before Stop), the config's status says so and names the
// running operation, held open by the runner, that the stop waits for.
func TestStoppingReportsWhatTheStopWaitsFor(t *testing.T) {
	h := newHarness(t, "stacks:\n  - {name: app, stack: dev, projectRepo: https://git.example/app.git, branch: main}\n", nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.gate = make(chan struct{})
	h.start()
	h.eventually("the update running", func() bool { h.runner.mu.Lock(); defer h.runner.mu.Unlock(); return h.runner.running == 1 })
	if st := h.d.ConfigStatus(); st.Stopping || len(st.WaitingFor) != 0 {
		t.Fatalf("before the stop: stopping=%v, waiting for %v", st.Stopping, st.WaitingFor)
	}
	h.d.Stopping()
	st := h.d.ConfigStatus()
	if !st.Stopping || len(st.WaitingFor) != 1 || !slices.ContainsFunc(st.WaitingFor, func(w string) bool { return w == "app (app-1)" }) {
		t.Errorf("once stopping: stopping=%v, waiting for %q, want app (app-1)", st.Stopping, st.WaitingFor)
	}
	h.runner.gate <- struct{}{}
	h.eventually("deployed", func() bool { return h.ready("app") })
}
