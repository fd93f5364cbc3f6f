package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// destroyAwaiting says the stack's destroy awaits approval.
func destroyAwaiting(v model.StackView) bool {
	g := v.Status.Gate
	return awaitingAt("")(v) && g.Type == model.UpdateDestroy
}

// deletesFile says the gate's steps delete the test provider's File.
func deletesFile(g *model.Gate, path string) bool {
	return slices.ContainsFunc(g.Steps, func(s model.Step) bool {
		return s.Op == "delete" && s.Type == "stackdtest:index:File" && s.Old["path"] == path
	})
}

// TestE2EApprovalHoldsDestroy is the acceptance of approval for the
// destroy of a removed stack: a stack with approval: {required: true} and
// destroyOnFinalize is removed from the config; its destroy is previewed
// and waits for approval with the File's delete, the File stays; an
// approval naming another plan is refused; stackd approve destroys it and
// the stack is finalized.
func TestE2EApprovalHoldsDestroy(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    destroyOnFinalize: true\n    approval: {required: true}\n"), "")
	in.waitStack("app", "the first plan", 2*time.Minute, awaitingAt(""))
	in.approveAndWait("app")
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q after the first approval", got)
	}

	in.reload("stacks: []\n")
	v := in.waitStack("app", "the destroy awaiting approval", 2*time.Minute, destroyAwaiting)
	g := v.Status.Gate
	if !deletesFile(g, out) || g.Changes["delete"] == 0 || !strings.Contains(g.Reason, "approval is required") {
		t.Fatalf("gate %+v, want the File's delete awaiting approval", g)
	}
	if v.Status.Health == nil || v.Status.Health.Status != model.HealthAwaitingApproval {
		t.Errorf("health = %+v, want AwaitingApproval", v.Status.Health)
	}
	time.Sleep(time.Second)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a destroy awaiting approval changed the file to %q", got)
	}
	if files := plansLeft(t, in.flags.dataDir, "app"); len(files) != 0 {
		t.Errorf("a destroy's plan left files: %v", files)
	}
	var status bytes.Buffer
	if err := statusCommand(in.clientArgs("app"), &status); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "destroy plan "+g.Plan.ID+" AwaitingApproval") ||
		!strings.Contains(status.String(), "delete urn:pulumi:app::e2e::stackdtest:index:File::note") {
		t.Errorf("stackd status app does not show the destroy:\n%s", status.String())
	}
	if code, body := in.decide("app", "approve", "0123456789abcdef"); code != http.StatusConflict {
		t.Fatalf("approving another plan: %d %s, want 409", code, body)
	}
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a refused approval changed the file to %q", got)
	}

	var stdout bytes.Buffer
	if err := decideCommand("approve", in.clientArgs("app"), &stdout); err != nil {
		t.Fatal(err)
	}
	t.Logf("stackd approve:\n%s", stdout.String())
	if !strings.Contains(stdout.String(), "destroy plan "+g.Plan.ID+" of app: approved") {
		t.Errorf("stackd approve printed:\n%s", stdout.String())
	}
	in.waitGone("app")
	if got := readFile(t, out); got != "" {
		t.Fatalf("the approved destroy left the file: %q", got)
	}
	if !strings.Contains(in.logs.String(), "Approved by admin-token: destroy plan "+g.Plan.ID) {
		t.Error("the log does not say who approved the destroy")
	}
}

// TestE2EPolicyDeniesDestroy: with a policy that denies deleting the test
// provider's File, removing a stack with destroyOnFinalize stalls it with
// PolicyDenied: it stays listed and the File stays. Put back into the
// config, the stack is managed as before and nothing is destroyed.
func TestE2EPolicyDeniesDestroy(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	first := r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	config := "stacks:\n" + stackYAML("app", r, pathConfig(out)+"    destroyOnFinalize: true\n")
	in := startDaemonWith(t, config, "", func(f *runFlags) { f.policy = policyDir(t) })
	in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == first
	})

	in.reload("stacks: []\n")
	v := in.waitStack("app", "the denied destroy", 2*time.Minute, stalledFor(model.ReasonPolicyDenied))
	denial := "deleting " + out + " is not allowed (stack app)"
	g := v.Status.Gate
	if g == nil || g.Type != model.UpdateDestroy || g.State != model.GatePolicyDenied || !deletesFile(g, out) ||
		len(g.Violations) != 1 || g.Violations[0].Message != denial {
		t.Fatalf("gate %+v, want the destroy denied by the policy", g)
	}
	if c := v.Status.Condition(model.ConditionStalled); !strings.Contains(c.Message, "denied by policy: stackd.files: "+denial) {
		t.Errorf("stalled message %q, want the denial", c.Message)
	}
	time.Sleep(time.Second)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a denied destroy changed the file to %q", got)
	}
	if code, _ := in.get("/api/v1/stacks/app", nil); code != http.StatusOK {
		t.Fatalf("the stack whose destroy was denied is no longer listed: %d", code)
	}
	if slices.ContainsFunc(in.updates("app"), func(u model.Update) bool { return u.Type == model.UpdateDestroy }) {
		t.Fatal("a destroy ran")
	}

	in.reload(config)
	in.waitStack("app", "back and Ready", time.Minute, func(v model.StackView) bool { return isReady(v) && v.Status.Gate == nil })
	time.Sleep(time.Second)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("the stack put back has the file %q", got)
	}
	if slices.ContainsFunc(in.updates("app"), func(u model.Update) bool { return u.Type == model.UpdateDestroy }) {
		t.Fatal("a destroy ran")
	}
}
