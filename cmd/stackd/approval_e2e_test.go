package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// awaitingAt says the stack's plan for commit awaits approval.
func awaitingAt(commit string) func(v model.StackView) bool {
	return func(v model.StackView) bool {
		g := v.Status.Gate
		c := v.Status.Condition(model.ConditionAwaitingApproval)
		return g != nil && g.State == model.GateAwaiting && g.Plan != nil && (commit == "" || g.Commit == commit) &&
			c != nil && c.Status == "True"
	}
}

// decide posts an approval or a rejection of plan with the admin token and
// returns the status and the body.
func (in *instance) decide(name, action, plan string) (int, []byte) {
	in.t.Helper()
	body, _ := json.Marshal(map[string]string{"plan": plan})
	return in.postJSON("/api/v1/stacks/"+name+"/"+action, body,
		map[string]string{"Authorization": "Bearer " + in.token, "Content-Type": "application/json"}, nil)
}

// approveAndWait approves the plan that awaits approval and waits for the
// stack to apply it.
func (in *instance) approveAndWait(name string) model.StackView {
	in.t.Helper()
	g := in.stack(name).Status.Gate
	if code, body := in.decide(name, "approve", g.Plan.ID); code != http.StatusOK {
		in.t.Fatalf("approve %s: %d %s", name, code, body)
	}
	return in.waitStack(name, "the approved plan applied", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == g.Commit
	})
}

// page fetches a UI page with the admin token.
func (in *instance) page(path string) string {
	in.t.Helper()
	code, body := in.as(http.MethodGet, path, in.token)
	if code != http.StatusOK {
		in.t.Fatalf("GET %s: %d", path, code)
	}
	return string(body)
}

// plansLeft lists the plan files left in the stack's state directory.
func plansLeft(t *testing.T, dataDir, name string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "workspaces", name, "plans", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestE2EApprovalRequired: with approval: {required: true} a commit leaves
// the File unchanged and the stack AwaitingApproval with the diff; an
// approval naming another plan is refused; approving the plan applies it;
// the history says who approved which plan; stackd reject refuses the next
// one.
func TestE2EApprovalRequired(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	first := r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    approval: {required: true}\n"), "")

	// Even the first deploy waits. Its reason and its summary count the
	// same: the program's File, not the stack's root or the provider.
	g := in.waitStack("app", "the first plan", 2*time.Minute, awaitingAt(first)).Status.Gate
	if !maps.Equal(g.Changes, map[string]int{"create": 1}) || g.Reason != "approval is required: 1 resource(s) change" {
		t.Fatalf("the first plan: %q beside the summary %v", g.Reason, g.Changes)
	}
	if got := readFile(t, out); got != "" {
		t.Fatalf("a plan awaiting approval wrote the file: %q", got)
	}
	in.approveAndWait("app")
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q after the first approval", got)
	}

	second := r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	v := in.waitStack("app", "the second plan", 2*time.Minute, awaitingAt(second))
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a plan awaiting approval changed the file to %q", got)
	}
	g = v.Status.Gate
	if v.Status.Health == nil || v.Status.Health.Status != model.HealthAwaitingApproval {
		t.Errorf("health = %+v, want AwaitingApproval", v.Status.Health)
	}
	i := slices.IndexFunc(g.Steps, func(s model.Step) bool { return s.Type == "stackdtest:index:File" })
	if i < 0 || g.Steps[i].Op != "update" || !slices.Contains(g.Steps[i].Diffs, "content") || g.Changes["update"] != 1 {
		t.Fatalf("the plan's steps %+v and summary %v do not show the File's content updated", g.Steps, g.Changes)
	}
	if g.Steps[i].New["content"] != "hello v2" {
		t.Errorf("the step's new inputs %v lack the new content", g.Steps[i].New)
	}
	log, _, err := in.app.d.Log(g.Update)
	if err != nil || !strings.Contains(string(log), "hello v2") {
		t.Errorf("the preview's log (the full diff) lacks the new content (%v):\n%s", err, log)
	}
	if _, body := in.get("/metrics", nil); !bytes.Contains(body, []byte("stackd_stacks_awaiting_approval 1")) {
		t.Error("/metrics lacks stackd_stacks_awaiting_approval 1")
	}
	if files := plansLeft(t, in.flags.dataDir, "app"); len(files) != 1 {
		t.Errorf("plan files = %v, want the one awaiting approval", files)
	} else if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the plan file's mode: %v %v", fi, err)
	}

	var status bytes.Buffer
	if err := statusCommand(in.clientArgs("app"), &status); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "plan "+g.Plan.ID) || !strings.Contains(status.String(), "AwaitingApproval") {
		t.Errorf("stackd status app does not show the plan:\n%s", status.String())
	}
	page := in.page("/stacks/app")
	if !strings.Contains(page, "Plan awaiting approval") || !strings.Contains(page, `name="plan" value="`+g.Plan.ID+`"`) {
		t.Errorf("the stack page does not show the plan with its approve form")
	}

	// A page that shows another plan cannot approve this one.
	if code, body := in.decide("app", "approve", "0123456789abcdef"); code != http.StatusConflict {
		t.Fatalf("approving another plan: %d %s, want 409", code, body)
	}
	// Without a token: refused.
	if code := in.post("/api/v1/stacks/app/approve", []byte(`{"plan":"`+g.Plan.ID+`"}`), map[string]string{"Content-Type": "application/json"}); code != http.StatusUnauthorized {
		t.Fatalf("approving without the token: %d, want 401", code)
	}
	time.Sleep(time.Second)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("a refused approval changed the file to %q", got)
	}

	// Approved by its digest: applied.
	if code, body := in.decide("app", "approve", g.Plan.Digest); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	v = in.waitStack("app", "the approved plan applied", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == second
	})
	if got := readFile(t, out); got != "hello v2" {
		t.Fatalf("file = %q after the approval", got)
	}
	if v.Status.Gate != nil {
		t.Errorf("the applied plan still holds the stack: %+v", v.Status.Gate)
	}
	if files := plansLeft(t, in.flags.dataDir, "app"); len(files) != 0 {
		t.Errorf("plan files left after the apply: %v", files)
	}
	updates := in.updates("app")
	approved := "Approved by admin-token: plan " + g.Plan.ID
	up := slices.IndexFunc(updates, func(u model.Update) bool { return u.Reason == approved })
	preview := slices.IndexFunc(updates, func(u model.Update) bool { return u.ID == g.Update })
	if up < 0 || updates[up].State != model.UpdateSucceeded || updates[up].Type != model.UpdateUp || updates[up].Commit != second {
		t.Fatalf("no successful up with reason %q in %+v", approved, updates)
	}
	if preview < 0 || updates[preview].Type != model.UpdatePreview || !strings.Contains(updates[preview].Message, "approved by admin-token at ") {
		t.Fatalf("the plan's preview in the history does not say who approved it: %+v", updates)
	}
	audit := in.audit("?stack=app")
	if !slices.ContainsFunc(audit, func(e model.AuditEntry) bool {
		return e.Action == access.ActionApprove && e.Outcome == model.AuditAllowed && e.Path == "/api/v1/stacks/app/approve"
	}) {
		t.Errorf("the audit trail lacks the approval: %+v", audit)
	}

	// stackd reject: the plan is discarded, nothing applied, the stack says why.
	third := r.commit(map[string]string{"Pulumi.yaml": program("v3")})
	in.waitStack("app", "the third plan", 2*time.Minute, awaitingAt(third))
	var stdout bytes.Buffer
	if err := decideCommand("reject", in.clientArgs("app", "--reason", "not during the sale"), &stdout); err != nil {
		t.Fatal(err)
	}
	t.Logf("stackd reject:\n%s", stdout.String())
	if !strings.Contains(stdout.String(), "update urn:pulumi:app::e2e::stackdtest:index:File::note (content)") ||
		!strings.Contains(stdout.String(), "rejected") {
		t.Errorf("stackd reject printed:\n%s", stdout.String())
	}
	v = in.waitStack("app", "rejected", time.Minute, stalledFor(model.ReasonPlanRejected))
	if c := v.Status.Condition(model.ConditionStalled); !strings.Contains(c.Message, "rejected by admin-token") || !strings.Contains(c.Message, "not during the sale") {
		t.Errorf("stalled message = %q", c.Message)
	}
	time.Sleep(time.Second)
	if got := readFile(t, out); got != "hello v2" {
		t.Fatalf("a rejected plan changed the file to %q", got)
	}
	if files := plansLeft(t, in.flags.dataDir, "app"); len(files) != 0 {
		t.Errorf("plan files left after the rejection: %v", files)
	}
}

// TestE2EApprovalPlanNoLongerHolds: the File is deleted by hand between
// the preview and the approval of a stack with refresh: true; the up
// constrained to the plan refuses (it would create the File, the plan
// updates it), applies nothing outside the plan, and says why in the
// history; a new preview asks again at once, counting no failure.
func TestE2EApprovalPlanNoLongerHolds(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    refresh: true\n    approval: {required: true}\n"), "")
	in.waitStack("app", "the first plan", 2*time.Minute, awaitingAt(""))
	in.approveAndWait("app")

	second := r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	old := in.waitStack("app", "the second plan", 2*time.Minute, awaitingAt(second)).Status.Gate
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if code, body := in.decide("app", "approve", old.Plan.ID); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	// A new preview asks again at once, for what the resources are now.
	v := in.waitStack("app", "a new plan", 2*time.Minute, func(v model.StackView) bool {
		return awaitingAt(second)(v) && v.Status.Gate.Plan.ID != old.Plan.ID
	})
	updates := in.updates("app")
	i := slices.IndexFunc(updates, func(u model.Update) bool { return u.Reason == "Approved by admin-token: plan "+old.Plan.ID })
	if i < 0 || updates[i].State != model.UpdateFailed || updates[i].Commit != second {
		t.Fatalf("no failed up of the approved plan in %+v", updates)
	}
	msg := updates[i].Message
	t.Logf("the refused up: %s", msg)
	if !strings.Contains(msg, "the saved plan no longer holds") || !strings.Contains(msg, "violates plan") && !strings.Contains(msg, "not allowed by the plan") {
		t.Fatalf("the failed up says %q, want why the plan no longer holds", msg)
	}
	if got := readFile(t, out); got != "" {
		t.Fatalf("an up outside its plan wrote the file: %q", got)
	}
	if !strings.Contains(v.Status.Gate.Refused, "the saved plan no longer holds") {
		t.Errorf("the new plan does not say why the approved one was not applied: %+v", v.Status.Gate)
	}
	if lu := v.Status.LastUpdate; lu == nil || lu.State != model.UpdateSucceeded || lu.Failures != 0 {
		t.Errorf("the refusal counted as a failure: %+v", lu)
	}
	if !slices.ContainsFunc(v.Status.Gate.Steps, func(s model.Step) bool { return s.Op == "create" && s.Type == "stackdtest:index:File" }) {
		t.Errorf("the new plan's steps %+v do not create the File again", v.Status.Gate.Steps)
	}
	in.approveAndWait("app")
	if got := readFile(t, out); got != "hello v2" {
		t.Fatalf("file = %q after approving the new plan", got)
	}
}

// TestE2EPullRequestSaysApprovalWaits: under the daemon's --approval
// budget {when: [update]}, the first deploy (creates only) applies by
// itself; a pull request that updates the File says in its comment that
// the stack will wait for approval after merge.
func TestE2EPullRequestSaysApprovalWaits(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	v1 := programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := outDir(t)
	g.start(g.previewStack("app", g.url("infra"), out), func(f *runFlags) { f.approval = "{when: [update]}" })
	v := g.in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})
	if v.Status.Gate != nil {
		t.Fatalf("a deploy within the budget was held: %+v", v.Status.Gate)
	}

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 1}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
	g.hook(pr, "opened")
	g.waitStatus(pr, "stackd/app")
	c := g.waitComment(pr)
	if !strings.Contains(c.Body, "After merge, `app` waits for approval: the plan has steps of approval.when: update.") {
		t.Errorf("the comment does not say the stack will wait for approval:\n%s", c.Body)
	}
}
