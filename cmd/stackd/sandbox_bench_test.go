package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/sandbox"
)

// BenchmarkSandboxUp prints what the sandbox costs: a no-change up of a
// stack with one test-provider resource, through the runner confined by
// Landlock and through one with --sandbox=off, alternately, and the ratio
// of their mean times (goal: at most 1.03).
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
	var tConfined, tOpen time.Duration
	b.ResetTimer()
	for range b.N {
		tConfined += confined.up(b)
		tOpen += open.up(b)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(tConfined.Seconds()/n, "landlock-s/op")
	b.ReportMetric(tOpen.Seconds()/n, "off-s/op")
	b.ReportMetric(tConfined.Seconds()/tOpen.Seconds(), "ratio")
}

// benchStack is a deployed stack of a runner of its own.
type benchStack struct {
	r  *runner.Runner
	op daemon.Operation
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
	s := &benchStack{r: r, op: daemon.Operation{Type: daemon.UpdateUp, Workspace: daemon.Workspace{
		Name: "bench", Stack: "dev", ProjectDir: project, WorkDir: work}}}
	s.up(b)
	return s
}

// up runs the stack's up and times it.
func (s *benchStack) up(b *testing.B) time.Duration {
	b.Helper()
	op := s.op
	op.Log = io.Discard
	start := time.Now()
	if _, err := s.r.Run(context.Background(), op); err != nil {
		b.Fatalf("up: %v", err)
	}
	return time.Since(start)
}
