package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/scrub"
)

// planRunner is a fakeRunner that saves plans: a preview with SavePlan
// returns a new plan and steps; it records the plans discarded.
type planRunner struct {
	*fakeRunner
	steps     []Step
	saved     int
	discarded []string
	// stale makes the next up constrained to a plan refuse it.
	stale bool
}

func newPlanRunner(steps ...Step) *planRunner {
	return &planRunner{fakeRunner: &fakeRunner{fail: map[string]error{}}, steps: steps}
}

func (r *planRunner) Run(ctx context.Context, op Operation) (Result, error) {
	r.mu.Lock()
	stale := r.stale && op.Plan != nil
	if stale {
		r.stale = false
		r.ops = append(r.ops, op)
	}
	r.mu.Unlock()
	if stale {
		return Result{}, fmt.Errorf("stack %s: %w: the stack's state changed since the preview, so nothing was applied", op.Name, ErrPlanStale)
	}
	res, err := r.fakeRunner.Run(ctx, op)
	if err != nil || !op.SavePlan {
		return res, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saved++
	res.Plan = &Plan{ID: fmt.Sprintf("%016x", r.saved), Digest: fmt.Sprintf("digest-%d", r.saved)}
	res.Steps, res.Changes = slices.Clone(r.steps), map[string]int{"update": len(r.steps)}
	return res, nil
}

func (r *planRunner) DiscardPlan(name, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discarded = append(r.discarded, id)
	return nil
}

func (r *planRunner) wasDiscarded(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.discarded, id)
}

// kinds lists the operations of name's ops: "preview+plan" for a preview
// that saved a plan, "up@ID" for an up constrained to plan ID.
func (r *planRunner) kinds(name string) string {
	var out []string
	for _, op := range r.opsOf(name) {
		k := op.Type
		switch {
		case op.SavePlan:
			k += "+plan"
		case op.Plan != nil:
			k += "@" + op.Plan.ID
		}
		out = append(out, k)
	}
	return strings.Join(out, ",")
}

// denyDeletes is a policy that denies deletes and warns of updates.
type denyDeletes struct{}

func (denyDeletes) Evaluate(_ context.Context, in PolicyInput) (PolicyVerdict, error) {
	var v PolicyVerdict
	for _, s := range in.Steps {
		switch s.Op {
		case "delete":
			v.Deny = append(v.Deny, Violation{Policy: "files", Level: PolicyDeny, Message: "no deleting " + s.URN})
		case "update":
			v.Warn = append(v.Warn, Violation{Policy: "files", Level: PolicyWarn, Message: "updating " + s.URN})
		}
	}
	return v, nil
}

func (h *harness) gate(name string) *Gate {
	v, err := h.d.Stack(name)
	if err != nil {
		return nil
	}
	return v.Status.Gate
}

func (h *harness) stalled(name, reason string) bool {
	v, err := h.d.Stack(name)
	if err != nil {
		return false
	}
	c := v.Status.Condition(ConditionStalled)
	return c != nil && c.Status == conditionTrue && c.Reason == reason
}

const fileURN = "urn:pulumi:dev::app::stackdtest:index:File::note"

// TestGatePolicyDenied: with policies, an up is a preview with a saved
// plan; a denied change is not applied, the stack stalls with
// PolicyDenied and each message, and the plan is discarded. An allowed
// one is applied constrained to its plan.
func TestGatePolicyDenied(t *testing.T) {
	r := newPlanRunner(Step{Op: "delete", URN: fileURN, Type: "stackdtest:index:File"})
	n := &recordingNotifier{}
	h := newHarness(t, oneStack, func(o *Options) { o.Runner, o.Policies, o.Notifier = r, denyDeletes{}, n })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("denied", func() bool { return h.stalled("app", ReasonPolicyDenied) })
	g := h.gate("app")
	if g == nil || g.State != GatePolicyDenied || len(g.Violations) != 1 || g.Violations[0].Message != "no deleting "+fileURN || g.Plan != nil {
		t.Fatalf("gate = %+v", g)
	}
	if got := r.kinds("app"); got != "preview+plan" {
		t.Fatalf("operations %s, want the preview alone", got)
	}
	if !r.wasDiscarded("0000000000000001") {
		t.Error("the denied plan was not discarded")
	}
	if !strings.Contains(n.kinds(), notify.StackStalled) {
		t.Errorf("events %s", n.kinds())
	}
	if u, _ := h.d.Update(g.Update); u.Type != UpdatePreview || u.State != UpdateFailed || !strings.Contains(u.Message, "denied by policy: files: no deleting") {
		t.Errorf("the preview's update = %+v", u)
	}

	// A new commit whose change the policies allow: applied with its plan.
	r.mu.Lock()
	r.steps = []Step{{Op: "update", URN: fileURN, Type: "stackdtest:index:File"}}
	r.mu.Unlock()
	h.fetcher.set("https://git.example/app.git", sha2, nil)
	h.eventually("applied", func() bool { l := h.last("app"); return h.ready("app") && l != nil && l.LastSuccessfulCommit == sha2 })
	if got := r.kinds("app"); got != "preview+plan,preview+plan,up@0000000000000002" {
		t.Fatalf("operations %s, want a preview, then a preview and the up constrained to its plan", got)
	}
	if h.gate("app") != nil {
		t.Errorf("gate left after the apply: %+v", h.gate("app"))
	}
}

// TestGateApproval: a plan that needs approval waits, is superseded by a
// newer commit, and applies once approved by its ID; an approval naming
// another plan is refused; a rejection discards the plan.
func TestGateApproval(t *testing.T) {
	r := newPlanRunner(Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	n := &recordingNotifier{}
	h := newHarness(t, oneStack+"    approval: {required: true}\n", func(o *Options) { o.Runner, o.Notifier = r, n })
	url := "https://git.example/app.git"
	h.fetcher.set(url, sha1, nil)
	h.start()
	awaiting := func(commit string) func() bool {
		return func() bool { g := h.gate("app"); return g != nil && g.State == GateAwaiting && g.Commit == commit }
	}
	h.eventually("awaiting approval", awaiting(sha1))
	v, _ := h.d.Stack("app")
	if v.Status.Health.Status != HealthAwaitingApproval || !strings.Contains(n.kinds(), notify.ApprovalNeeded) || h.d.Stats().AwaitingApproval != 1 {
		t.Fatalf("health %+v, events %s, stats %+v", v.Status.Health, n.kinds(), h.d.Stats())
	}
	if v.Status.LastUpdate != nil {
		t.Errorf("a held plan changed the last update: %+v", v.Status.LastUpdate)
	}

	// A newer commit supersedes the waiting plan.
	h.fetcher.set(url, sha2, nil)
	h.eventually("a new plan", awaiting(sha2))
	if !r.wasDiscarded("0000000000000001") {
		t.Error("the superseded plan was not discarded")
	}
	if err := h.d.Approve("app", "0000000000000001", "alice"); !errors.Is(err, ErrPlanMoved) {
		t.Fatalf("approving the superseded plan: %v", err)
	}
	if err := h.d.Approve("app", "digest-2", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("applied", func() bool { l := h.last("app"); return h.ready("app") && l != nil && l.LastSuccessfulCommit == sha2 })
	if got := r.kinds("app"); got != "preview+plan,preview+plan,up@0000000000000002" {
		t.Fatalf("operations %s", got)
	}
	ups, _ := h.d.Updates("app", 0, 10)
	if ups[0].Reason != "Approved by alice: plan 0000000000000002" {
		t.Errorf("the up's reason = %q", ups[0].Reason)
	}
	if err := h.d.Approve("app", "0000000000000002", "alice"); !errors.Is(err, ErrNoPlan) {
		t.Errorf("approving an applied plan: %v", err)
	}

	// A rejection: nothing runs until a new commit or a sync.
	h.fetcher.set(url, sha1, nil)
	h.eventually("a third plan", awaiting(sha1))
	if err := h.d.Reject("app", "0000000000000003", "bob", "too risky"); err != nil {
		t.Fatal(err)
	}
	h.eventually("rejected", func() bool { return h.stalled("app", ReasonPlanRejected) })
	if !r.wasDiscarded("0000000000000003") || len(r.opsOf("app")) != 4 {
		t.Errorf("discarded %v, operations %s", r.discarded, r.kinds("app"))
	}
	h.d.Sync("app")
	h.eventually("a plan after the sync", func() bool {
		g := h.gate("app")
		return g != nil && g.State == GateAwaiting && g.Plan.ID == "0000000000000004"
	})
}

// TestGateExpiry: a plan unapproved for maxAge expires: it is discarded
// and the stack stalls with PlanExpired.
func TestGateExpiry(t *testing.T) {
	r := newPlanRunner(Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	h := newHarness(t, oneStack+"    approval: {required: true, maxAge: 100ms}\n", func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("expired", func() bool { return h.stalled("app", ReasonPlanExpired) })
	if g := h.gate("app"); g == nil || g.State != GateExpired || !r.wasDiscarded("0000000000000001") {
		t.Fatalf("gate %+v, discarded %v", g, r.discarded)
	}
	if err := h.d.Approve("app", "0000000000000001", "alice"); !errors.Is(err, ErrNoPlan) {
		t.Errorf("approving an expired plan: %v", err)
	}
}

// TestScrubGate: a held plan's texts and input values lose the secrets
// the daemon knows before they are stored or served.
func TestScrubGate(t *testing.T) {
	const secret = "hunter2-gate-secret"
	r := scrub.NewRedactor(secret)
	g := &Gate{State: GatePolicyDenied, Reason: "denied by policy: files: token " + secret,
		Steps:      []Step{{Op: "update", URN: fileURN, New: map[string]any{"content": "x " + secret}}},
		Violations: []Violation{{Policy: "files", Level: PolicyDeny, Message: secret}}}
	s, changed := scrubStatus(StackStatus{Gate: g}, r)
	raw, _ := json.Marshal(s.Gate)
	if !changed || strings.Contains(string(raw), secret) || !strings.Contains(s.Gate.Reason, "denied by policy: files: token ") {
		t.Fatalf("changed %v, gate %s", changed, raw)
	}
	if g.Steps[0].New["content"] != "x "+secret || g.Reason != "denied by policy: files: token "+secret {
		t.Error("scrubbing changed the gate it was given")
	}
	if _, changed := scrubStatus(StackStatus{Gate: &Gate{State: GateAwaiting, Reason: "fine"}}, r); changed {
		t.Error("a clean gate was changed")
	}
}

// TestGateStalePlan: an approved plan that the runner refuses (it no
// longer holds) counts no failure: the history records the refusal, the
// stack says why, and a new preview asks again at once.
func TestGateStalePlan(t *testing.T) {
	r := newPlanRunner(Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	r.stale = true
	h := newHarness(t, oneStack+"    approval: {required: true}\n", func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("awaiting approval", func() bool { g := h.gate("app"); return g != nil && g.State == GateAwaiting })
	if err := h.d.Approve("app", "0000000000000001", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("a new plan", func() bool {
		g := h.gate("app")
		return g != nil && g.State == GateAwaiting && g.Plan.ID == "0000000000000002"
	})
	if g := h.gate("app"); !strings.Contains(g.Refused, "the saved plan no longer holds") {
		t.Errorf("the new plan does not say why the approved one was not applied: %+v", g)
	}
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,preview+plan" {
		t.Fatalf("operations %s", got)
	}
	if l := h.last("app"); l != nil {
		t.Errorf("the refusal changed the last update: %+v", l)
	}
	ups, _ := h.d.Updates("app", 0, 10)
	i := slices.IndexFunc(ups, func(u Update) bool { return u.Type == UpdateUp })
	if i < 0 || ups[i].State != UpdateFailed || !strings.Contains(ups[i].Message, "the saved plan no longer holds: the stack's state changed") {
		t.Fatalf("history %+v", ups)
	}
	if err := h.d.Approve("app", "0000000000000002", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("applied", func() bool { l := h.last("app"); return h.ready("app") && l != nil && l.LastSuccessfulCommit == sha1 })
}
