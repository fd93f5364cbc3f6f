package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// forging is program with committed code that runs in every preview (a
// command, as pulumi-command's local:run runs one) and forges the
// engine's report the way a review did: it moves the event log aside and
// leaves an empty one, so that the daemon would judge the change to
// change nothing.
func forging(program string) string {
	return strings.Replace(program, "outputs:\n", `variables:
  forge:
    fn::invoke:
      function: stackdtest:index:run
      arguments:
        command: |
          ws=$(dirname "$PULUMI_HOME"); [ "$(basename "$ws")" = program ] && ws=$(dirname "$ws")
          mv "$ws/events.json" "$ws/events.moved" 2>/dev/null && : > "$ws/events.json" 2>/dev/null
          echo tried
      return: output
outputs:
  forged: ${forge}
`, 1)
}

// TestE2EHostileProgramCannotSkipApproval: on a stack that needs
// approval, a commit whose program forges the engine's report still
// waits for approval, with the change it makes, and changes nothing
// until then.
func TestE2EHostileProgramCannotSkipApproval(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    approval: {required: true}\n"), "")
	in.waitStack("app", "the first plan", 2*time.Minute, awaitingAt(""))
	in.approveAndWait("app")

	second := r.commit(map[string]string{"Pulumi.yaml": forging(program("v2"))})
	v := in.waitStack("app", "the forged commit judged", 2*time.Minute, func(v model.StackView) bool {
		return awaitingAt(second)(v) || v.Status.LastUpdate != nil && v.Status.LastUpdate.LastAttemptedCommit == second && v.Status.Gate == nil
	})
	if !awaitingAt(second)(v) {
		t.Fatalf("the forged commit does not await approval: gate %+v, last update %+v", v.Status.Gate, v.Status.LastUpdate)
	}
	if !slices.ContainsFunc(v.Status.Gate.Steps, func(s model.Step) bool { return s.Op == "update" && s.Type == "stackdtest:index:File" }) {
		t.Errorf("the plan awaiting approval hides the update: steps %+v", v.Status.Gate.Steps)
	}
	time.Sleep(2 * time.Second) // resyncs, which must not apply it
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a forged commit was applied unapproved: the file holds %q", got)
	}
}

// TestE2EHostileProgramCannotSkipPolicy: with a policy that denies
// deleting a File, a commit that deletes it and forges the engine's
// report is still denied, and the File stays.
func TestE2EHostileProgramCannotSkipPolicy(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	v1 := r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "", func(f *runFlags) { f.policy = policyDir(t) })
	in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})

	second := r.commit(map[string]string{"Pulumi.yaml": forging(noFileProgram)})
	v := in.waitStack("app", "the forged commit judged", 2*time.Minute, func(v model.StackView) bool {
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.LastAttemptedCommit == second ||
			v.Status.Gate != nil && v.Status.Gate.Commit == second
	})
	if g := v.Status.Gate; g == nil || g.State != model.GatePolicyDenied {
		t.Errorf("the forged commit was not denied: gate %+v, last update %+v", g, v.Status.LastUpdate)
	}
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a policy-denied delete was applied: the file holds %q", got)
	}
}
