package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// The benchmarks compare one reconcile cycle of the daemon with a bare
// `pulumi up --yes --skip-preview` of the same program on the same kind of
// backend, and report the ratio (goals: at most 1.0 without a change,
// 1.05 with one). The gated cycle (change control: a preview that saves
// a plan, then an up constrained to it) is compared with the bare CLI
// running the same two commands (goal: at most 1.05). The daemon runs
// with its defaults, --pulumi-gogc among them; the bare CLI as a person
// runs it. BenchmarkE2ENoChangeUpGoDefaultGC is the like-for-like
// measure of what the daemon adds: both with Go's default GC.
//
//	go test -run '^$' -bench E2E -benchtime 10x ./cmd/stackd/

// BenchmarkE2ENoChangeUp: a sync request on an unchanged stack, from the
// request to the recorded outcome, against a no-change bare up.
func BenchmarkE2ENoChangeUp(b *testing.B) {
	benchCycle(b, false)
}

// BenchmarkE2EChangingUp: a commit that changes the resource, from the
// commit to the recorded outcome (the poll period excluded: the commit is
// announced with a sync request), against a changing bare up.
func BenchmarkE2EChangingUp(b *testing.B) {
	benchCycle(b, true)
}

// BenchmarkE2EGatedUp: a commit that changes the resource, on a stack
// with approval whose budget lets the change through: the daemon
// previews with a saved plan and applies it with up --plan, against the
// bare CLI's preview --save-plan and up --plan.
func BenchmarkE2EGatedUp(b *testing.B) {
	benchCycleOf(b, true, true)
}

// BenchmarkE2ENoChangeUpGoDefaultGC is BenchmarkE2ENoChangeUp with
// --pulumi-gogc 0: the daemon's own cost, the CLI's GC as the bare one's.
func BenchmarkE2ENoChangeUpGoDefaultGC(b *testing.B) {
	benchCycleWith(b, false, false, func(f *runFlags) { f.pulumiGOGC = 0 })
}

func benchCycle(b *testing.B, change bool) { benchCycleOf(b, change, false) }

func benchCycleOf(b *testing.B, change, gated bool) { benchCycleWith(b, change, gated, nil) }

func benchCycleWith(b *testing.B, change, gated bool, tweak func(*runFlags)) {
	bin := toolchainBin(b)
	bare := bareUp(b, bin, change, gated)
	r := newRepo(b)
	r.commit(map[string]string{"Pulumi.yaml": program("v0")})
	out := filepath.Join(outDir(b), "note.txt")
	extra := ""
	if gated {
		extra = "    approval: {maxChanges: 100}\n"
	}
	in := startDaemonWith(b, "stacks:\n"+stackYAML("app", r, pathConfig(out)+extra), "", tweak)
	in.waitStackFast("app", isReady)

	var daemonTotal time.Duration
	for i := range b.N {
		if change {
			r.commit(map[string]string{"Pulumi.yaml": program("v" + strconv.Itoa(i+1))})
		}
		start := time.Now()
		req, err := in.app.d.Sync("app")
		if err != nil {
			b.Fatal(err)
		}
		in.waitStackFast("app", func(v model.StackView) bool {
			return v.Status.LastUpdate != nil && v.Status.LastUpdate.ReconcileRequest == req && v.Status.CurrentUpdate == nil
		})
		daemonTotal += time.Since(start)
	}
	v, _ := in.app.d.Stack("app")
	if v.Status.LastUpdate.State != model.UpdateSucceeded {
		b.Fatalf("last update: %+v", v.Status.LastUpdate)
	}
	perDaemon := daemonTotal / time.Duration(b.N)
	perBare := bare(b.N)
	b.ReportMetric(perDaemon.Seconds(), "daemon-s/cycle")
	b.ReportMetric(perBare.Seconds(), "bare-s/up")
	b.ReportMetric(perDaemon.Seconds()/perBare.Seconds(), "ratio")
}

// bareUp prepares the same program for the bare CLI and returns a function
// that runs n ups (gated: each a preview that saves a plan and an up
// constrained to it) and returns the mean wall time.
func bareUp(b *testing.B, bin string, change, gated bool) func(n int) time.Duration {
	dir := b.TempDir()
	project := filepath.Join(dir, "project")
	state := filepath.Join(dir, "state")
	for _, d := range []string{project, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "PULUMI_HOME=" + filepath.Join(dir, "home"),
		"PULUMI_BACKEND_URL=file://" + state, "PULUMI_CONFIG_PASSPHRASE=bench", "PULUMI_SKIP_UPDATE_CHECK=true"}
	if gated {
		env = append(env, "PULUMI_EXPERIMENTAL=true") // up --plan needs it
	}
	pulumi := func(args ...string) {
		cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir, cmd.Env = project, env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(version string) {
		if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte(program(version)), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	write("v0")
	pulumi("stack", "init", "dev")
	pulumi("config", "set", "path", filepath.Join(dir, "note.txt"))
	pulumi("up", "--yes", "--skip-preview")
	return func(n int) time.Duration {
		var total time.Duration
		for i := range n {
			if change {
				write("v" + strconv.Itoa(i+1))
			}
			start := time.Now()
			if gated {
				plan := filepath.Join(dir, "plan.json")
				pulumi("preview", "--save-plan", plan)
				pulumi("up", "--yes", "--skip-preview", "--plan", plan)
			} else {
				pulumi("up", "--yes", "--skip-preview")
			}
			total += time.Since(start)
		}
		return total / time.Duration(n)
	}
}

// waitStackFast polls the daemon in-process, so that the measurement is
// not rounded up to an HTTP polling period.
func (in *instance) waitStackFast(name string, cond func(v model.StackView) bool) {
	in.t.Helper()
	in.waitStackEvery(name, time.Minute, 2*time.Millisecond, cond)
}

// waitStackEvery polls the daemon in-process every period until cond
// holds for the stack, for up to timeout.
func (in *instance) waitStackEvery(name string, timeout, period time.Duration, cond func(v model.StackView) bool) {
	in.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := in.app.d.Stack(name)
		if err == nil && cond(v) {
			return
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("stack %s: timed out; last: %+v", name, v.Status)
		}
		time.Sleep(period)
	}
}
