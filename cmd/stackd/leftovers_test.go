package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/sandbox"
)

// TestLeftoverMetric: stackd_leftover_processes_killed_total is what
// the reaper counted.
func TestLeftoverMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	var r sandbox.Reaper
	registerSandboxMetric(reg, true, &r)
	r.Killed(2)
	r.Killed(1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "stackd_leftover_processes_killed_total" {
			if got := f.GetMetric()[0].GetCounter().GetValue(); got != 3 {
				t.Fatalf("%s = %v, want 3", f.GetName(), got)
			}
			return
		}
	}
	t.Fatal("stackd_leftover_processes_killed_total is not registered")
}
