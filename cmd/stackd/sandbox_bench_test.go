package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/sandbox"
)

// BenchmarkSandboxUp prints what the sandbox costs: a no-change up of a
// stack with one test-provider resource, through the runner confined by
// Landlock and through one with --sandbox=off, alternately, and the ratio
// of their mean times (goal: at most 1.03); and the same of the CPU time
// their process trees used (user and system, of the children waited
// for), which a busy machine skews less than wall time.
//
//	go test -run '^$' -bench SandboxUp -benchtime 20x ./cmd/stackd/
func BenchmarkSandboxUp(b *testing.B) {
	bin := toolchainBin(b)
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	confined := newBenchStack(b, bin, sb)
	open := newBenchStack(b, bin, nil)
	var tConfined, tOpen, cConfined, cOpen time.Duration
	b.ResetTimer()
	for range b.N {
		t, c := confined.up(b)
		tConfined, cConfined = tConfined+t, cConfined+c
		t, c = open.up(b)
		tOpen, cOpen = tOpen+t, cOpen+c
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(tConfined.Seconds()/n, "landlock-s/op")
	b.ReportMetric(tOpen.Seconds()/n, "off-s/op")
	b.ReportMetric(tConfined.Seconds()/tOpen.Seconds(), "ratio")
	b.ReportMetric(cConfined.Seconds()/n, "landlock-cpu-s/op")
	b.ReportMetric(cOpen.Seconds()/n, "off-cpu-s/op")
	b.ReportMetric(cConfined.Seconds()/cOpen.Seconds(), "cpu-ratio")
}

// childrenCPU is the CPU time, user and system, of this process's
// children that ended and were waited for.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStack is a deployed stack of a runner of its own.
type benchStack struct {
	r  *runner.Runner
	op model.Operation
}

// newBenchStack makes a runner with sb (nil: unconfined) and deploys a
// stack whose File resource lives in its checkout. Both run each pulumi
// under the wrapper's reaping, as stackd run does with the sandbox on or
// off.
func newBenchStack(b *testing.B, bin string, sb runner.Confiner) *benchStack {
	b.Helper()
	work := b.TempDir()
	project := filepath.Join(work, "src")
	if err := os.MkdirAll(project, 0o755); err != nil {
		b.Fatal(err)
	}
	program := "name: bench\nruntime: yaml\nresources:\n  note:\n    type: stackdtest:index:File\n" +
		"    properties:\n      path: note.txt\n      content: unchanged\n"
	if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		b.Fatal(err)
	}
	r, err := runner.New(context.Background(), runner.Options{Bin: bin, DataDir: b.TempDir(), Sandbox: sb, Reaper: &sandbox.Reaper{},
		Env: []string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"}})
	if err != nil {
		b.Fatal(err)
	}
	s := &benchStack{r: r, op: model.Operation{Type: model.UpdateUp, Workspace: model.Workspace{
		Name: "bench", Stack: "dev", ProjectDir: project, WorkDir: work}}}
	s.up(b)
	return s
}

// up runs the stack's up and times it.
// up runs the no-change up and returns its wall time and the CPU time of
// its process tree.
func (s *benchStack) up(b *testing.B) (time.Duration, time.Duration) {
	b.Helper()
	op := s.op
	op.Log = io.Discard
	start, cpu := time.Now(), childrenCPU(b)
	if _, err := s.r.Run(context.Background(), op); err != nil {
		b.Fatalf("up: %v", err)
	}
	return time.Since(start), childrenCPU(b) - cpu
}
