package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/spec"
)

// planRunner is a fakeRunner that saves plans: a preview with SavePlan
// returns a new plan and steps; it records the plans discarded.
type planRunner struct {
	*fakeRunner
	steps []model.Step
	// judged and revealed are a judged preview's PolicySteps and
	// PolicySecrets; nil: the preview makes none.
	judged    []model.Step
	revealed  []string
	saved     int
	discarded []string
	// stale makes the next up constrained to a plan refuse it.
	stale bool
}

func newPlanRunner(steps ...model.Step) *planRunner {
	return &planRunner{fakeRunner: &fakeRunner{fail: map[string]error{}}, steps: steps}
}

func (r *planRunner) Run(ctx context.Context, op model.Operation) (model.Result, error) {
	r.mu.Lock()
	stale := r.stale && op.Plan != nil
	if stale {
		r.stale = false
		r.ops = append(r.ops, op)
	}
	r.mu.Unlock()
	if stale {
		return model.Result{}, fmt.Errorf("stack %s: %w: the stack's state changed since the preview, so nothing was applied", op.Name, ErrPlanStale)
	}
	res, err := r.fakeRunner.Run(ctx, op)
	if err != nil || !op.SavePlan {
		return res, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saved++
	res.Plan = &model.Plan{ID: fmt.Sprintf("%016x", r.saved), Digest: fmt.Sprintf("digest-%d", r.saved)}
	res.Steps, res.Changes = slices.Clone(r.steps), map[string]int{"update": len(r.steps)}
	if op.Judged && r.judged != nil {
		res.PolicySteps, res.PolicySecrets = slices.Clone(r.judged), slices.Clone(r.revealed)
	}
	return res, nil
}

func (r *planRunner) setSteps(steps ...model.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = steps
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
// that saved a plan, "up@ID" for an up constrained to plan ID,
// "destroy-preview+plan" for a destroy preview that bound a plan.
func (r *planRunner) kinds(name string) string {
	var out []string
	for _, op := range r.opsOf(name) {
		k := op.Type
		if op.PreviewOnly {
			k += "-preview"
		}
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

func (denyDeletes) Evaluate(_ context.Context, in model.PolicyInput) (model.PolicyVerdict, error) {
	var v model.PolicyVerdict
	for _, s := range in.Steps {
		switch s.Op {
		case "delete":
			v.Deny = append(v.Deny, model.Violation{Policy: "files", Level: model.PolicyDeny, Message: "no deleting " + s.URN})
		case "update":
			v.Warn = append(v.Warn, model.Violation{Policy: "files", Level: model.PolicyWarn, Message: "updating " + s.URN})
		}
	}
	return v, nil
}

func (h *harness) gate(name string) *model.Gate {
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
	c := v.Status.Condition(model.ConditionStalled)
	return c != nil && c.Status == conditions.True && c.Reason == reason
}

const fileURN = "urn:pulumi:dev::app::stackdtest:index:File::note"

// TestGatePolicyDenied: with policies, an up is a preview with a saved
// plan; a denied change is not applied, the stack stalls with
// PolicyDenied and each message, and the plan is discarded. An allowed
// one is applied constrained to its plan.
func TestGatePolicyDenied(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "delete", URN: fileURN, Type: "stackdtest:index:File"})
	n := &recordingNotifier{}
	h := newHarness(t, oneStack, func(o *Options) { o.Runner, o.Policies, o.Notifier = r, denyDeletes{}, n })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("denied", func() bool { return h.stalled("app", model.ReasonPolicyDenied) })
	g := h.gate("app")
	if g == nil || g.State != model.GatePolicyDenied || len(g.Violations) != 1 || g.Violations[0].Message != "no deleting "+fileURN || g.Plan != nil {
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
	if u, _ := h.d.Update(g.Update); u.Type != model.UpdatePreview || u.State != model.UpdateFailed || !strings.Contains(u.Message, "denied by policy: files: no deleting") {
		t.Errorf("the preview's update = %+v", u)
	}

	// A new commit whose change the policies allow: applied with its plan.
	r.mu.Lock()
	r.steps = []model.Step{{Op: "update", URN: fileURN, Type: "stackdtest:index:File"}}
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

// absolutePaths denies, and warns of, a File written to an absolute
// path, naming the path.
type absolutePaths struct{}

func (absolutePaths) Evaluate(_ context.Context, in model.PolicyInput) (model.PolicyVerdict, error) {
	var v model.PolicyVerdict
	for _, s := range in.Steps {
		if p, _ := s.New["path"].(string); strings.HasPrefix(p, "/") {
			v.Deny = append(v.Deny, model.Violation{Policy: "paths", Level: model.PolicyDeny, Message: "absolute path " + p})
			v.Warn = append(v.Warn, model.Violation{Policy: "paths", Level: model.PolicyWarn, Message: "writes " + p})
		}
	}
	return v, nil
}

// TestGatePolicySeesSecrets: the policies judge a preview's steps with
// their secret values in clear (PolicySteps), so a secret path is denied
// as a plain one is; what is recorded and shown of it (the gate's steps
// and messages, the update and its log, the notification) holds
// "[secret]" in its place, never the path, which the daemon knew of
// from nowhere else.
func TestGatePolicySeesSecrets(t *testing.T) {
	const path = "/srv/hidden-4711/key"
	r := newPlanRunner(model.Step{Op: "create", URN: fileURN, Type: "stackdtest:index:File", New: map[string]any{"path": "[secret]"}})
	r.judged = []model.Step{{Op: "create", URN: fileURN, Type: "stackdtest:index:File", New: map[string]any{"path": path}}}
	r.revealed = []string{path}
	n := &recordingNotifier{}
	h := newHarness(t, oneStack, func(o *Options) { o.Runner, o.Policies, o.Notifier = r, absolutePaths{}, n })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("denied", func() bool { return h.stalled("app", model.ReasonPolicyDenied) })
	if ops := r.opsOf("app"); len(ops) != 1 || !ops[0].Judged {
		t.Fatalf("operations %+v, want one judged preview", ops)
	}
	g := h.gate("app")
	if g.State != model.GatePolicyDenied || len(g.Violations) != 2 || g.Violations[0].Message != "absolute path [secret]" ||
		g.Steps[0].New["path"] != "[secret]" || !strings.Contains(g.Reason, "paths: absolute path [secret]") {
		t.Fatalf("gate %+v, want the denial with the path masked", g)
	}
	rec, err := h.store.Stack("app")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := h.d.Update(g.Update)
	log, _ := h.store.Log(g.Update)
	recorded, _ := json.Marshal([]any{rec, u, n.events, model.Result{PolicySteps: r.judged, PolicySecrets: r.revealed}})
	if strings.Contains(string(recorded)+string(log), "hidden-4711") {
		t.Errorf("the secret path is recorded or shown:\n%s\n%s", recorded, log)
	}
	if !strings.Contains(string(log), "policy warning (paths): writes [secret]") {
		t.Errorf("the log lacks the warning, scrubbed:\n%s", log)
	}
}

// TestGateApproval: a plan that needs approval waits, is superseded by a
// newer commit, and applies once approved by its ID; an approval naming
// another plan is refused; a rejection discards the plan.
func TestGateApproval(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	n := &recordingNotifier{}
	h := newHarness(t, oneStack+"    approval: {required: true}\n", func(o *Options) { o.Runner, o.Notifier = r, n })
	url := "https://git.example/app.git"
	h.fetcher.set(url, sha1, nil)
	h.start()
	awaiting := func(commit string) func() bool {
		return func() bool {
			g := h.gate("app")
			return g != nil && g.State == model.GateAwaiting && g.Commit == commit
		}
	}
	h.eventually("awaiting approval", awaiting(sha1))
	v, _ := h.d.Stack("app")
	if v.Status.Health.Status != model.HealthAwaitingApproval || !strings.Contains(n.kinds(), notify.ApprovalNeeded) || h.d.Stats().AwaitingApproval != 1 {
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
	h.eventually("rejected", func() bool { return h.stalled("app", model.ReasonPlanRejected) })
	if !r.wasDiscarded("0000000000000003") || len(r.opsOf("app")) != 4 {
		t.Errorf("discarded %v, operations %s", r.discarded, r.kinds("app"))
	}
	h.d.Sync("app")
	h.eventually("a plan after the sync", func() bool {
		g := h.gate("app")
		return g != nil && g.State == model.GateAwaiting && g.Plan.ID == "0000000000000004"
	})
}

// TestGateExpiry: a plan unapproved for maxAge expires: it is discarded
// and the stack stalls with PlanExpired.
func TestGateExpiry(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	h := newHarness(t, oneStack+"    approval: {required: true, maxAge: 100ms}\n", func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("expired", func() bool { return h.stalled("app", model.ReasonPlanExpired) })
	if g := h.gate("app"); g == nil || g.State != model.GateExpired || !r.wasDiscarded("0000000000000001") {
		t.Fatalf("gate %+v, discarded %v", g, r.discarded)
	}
	if err := h.d.Approve("app", "0000000000000001", "alice"); !errors.Is(err, ErrNoPlan) {
		t.Errorf("approving an expired plan: %v", err)
	}
}

// TestGateStalePlan: an approved plan that the runner refuses (it no
// longer holds) counts no failure: the history records the refusal, the
// stack says why, and a new preview asks again at once.
func TestGateStalePlan(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	r.stale = true
	h := newHarness(t, oneStack+"    approval: {required: true}\n", func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("awaiting approval", func() bool { g := h.gate("app"); return g != nil && g.State == model.GateAwaiting })
	if err := h.d.Approve("app", "0000000000000001", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("a new plan", func() bool {
		g := h.gate("app")
		return g != nil && g.State == model.GateAwaiting && g.Plan.ID == "0000000000000002"
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
	i := slices.IndexFunc(ups, func(u model.Update) bool { return u.Type == model.UpdateUp })
	if i < 0 || ups[i].State != model.UpdateFailed || !strings.Contains(ups[i].Message, "the saved plan no longer holds: the stack's state changed") {
		t.Fatalf("history %+v", ups)
	}
	if err := h.d.Approve("app", "0000000000000002", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("applied", func() bool { l := h.last("app"); return h.ready("app") && l != nil && l.LastSuccessfulCommit == sha1 })
}

// TestApprovalOf: a removed stack's destroy takes the approval and the
// labels of its last spec, else those its record kept (after a restart),
// else the daemon's default approval.
func TestApprovalOf(t *testing.T) {
	def, own, kept := &spec.Approval{Required: true}, &spec.Approval{MaxChanges: 3}, &spec.Approval{When: []string{"delete"}}
	withApproval := &spec.Stack{Labels: map[string]string{"env": "prod"}, Spec: spec.StackSpec{Approval: own}}
	without := &spec.Stack{Labels: map[string]string{"env": "dev"}}
	ds := &model.DestroySpec{Approval: kept, Labels: map[string]string{"env": "kept"}}
	for _, c := range []struct {
		name      string
		s, gone   *spec.Stack
		ds        *model.DestroySpec
		want      *spec.Approval
		wantLabel string
	}{
		{"in the config, its own", withApproval, nil, ds, own, "prod"},
		{"in the config, the default", without, nil, ds, def, "dev"},
		{"removed, its last spec's", nil, withApproval, ds, own, "prod"},
		{"removed, its last spec has none: the default", nil, without, ds, def, "dev"},
		{"removed, after a restart: the record's", nil, nil, ds, kept, "kept"},
		{"removed, the record kept none: the default", nil, nil, &model.DestroySpec{}, def, ""},
		{"removed, nothing known: the default", nil, nil, nil, def, ""},
	} {
		if got := gate.ApprovalOf(c.s, c.gone, c.ds, def); got != c.want {
			t.Errorf("%s: approval %+v, want %+v", c.name, got, c.want)
		}
		if got := gate.LabelsOf(c.s, c.gone, c.ds)["env"]; got != c.wantLabel {
			t.Errorf("%s: label %q, want %q", c.name, got, c.wantLabel)
		}
	}
	s := &spec.Stack{Labels: map[string]string{"env": "prod"}, Spec: spec.StackSpec{Stack: "dev", DestroyOnFinalize: true, Approval: own}}
	if got := resolve.DestroySpec(s, "dir"); got.Approval != own || got.Labels["env"] != "prod" {
		t.Errorf("the record keeps %+v, want the spec's approval and labels", got)
	}
	// The record keeps them through its JSON form.
	rec := model.StackRecord{Name: "app", Destroy: &model.DestroySpec{Labels: map[string]string{"env": "prod"},
		Approval: &spec.Approval{When: []string{"delete"}, MaxChanges: 2, Types: []string{"aws:rds/*"}, MaxAge: spec.Duration{Duration: time.Hour}}}}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back model.StackRecord
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back.Destroy, rec.Destroy) {
		t.Errorf("the record %s reads back as %+v (%v)", data, back.Destroy, err)
	}
}

// destroyable is oneStack with destroyOnFinalize and extra fields.
func destroyable(extra string) string {
	return oneStack + "    destroyOnFinalize: true\n" + extra
}

// TestGateDestroyApproval: a stack whose approval holds deletes is
// removed from the config: its destroy is previewed (a destroy preview
// that binds a plan, exporting and removing nothing), waits for approval
// with the deletes, and runs constrained to that plan once approved; the
// stack is then forgotten. A refused plan (the state moved) counts no
// failure and asks again.
func TestGateDestroyApproval(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	n := &recordingNotifier{}
	h := newHarness(t, destroyable("    approval: {when: [delete]}\n    updateTemplate: {spec: {remove: true}}\n"),
		func(o *Options) { o.Runner, o.Notifier = r, n })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001" {
		t.Fatalf("operations %s, want the update within the budget applied with its plan", got)
	}

	r.setSteps(model.Step{Op: "delete", URN: fileURN, Type: "stackdtest:index:File", Old: map[string]any{"path": "note.txt"}})
	r.mu.Lock()
	r.stale = true
	r.mu.Unlock()
	if err := h.d.Apply(h.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	awaiting := func(id string) func() bool {
		return func() bool {
			g := h.gate("app")
			return g != nil && g.State == model.GateAwaiting && g.Plan != nil && g.Plan.ID == id
		}
	}
	h.eventually("the destroy awaits approval", awaiting("0000000000000002"))
	g := h.gate("app")
	if g.Type != model.UpdateDestroy || len(g.Steps) != 1 || g.Steps[0].Op != "delete" || !strings.Contains(g.Reason, "approval.when: delete") {
		t.Fatalf("gate %+v, want the destroy's delete waiting", g)
	}
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,destroy-preview+plan" {
		t.Fatalf("operations %s, want a destroy preview and nothing destroyed", got)
	}
	ops := r.opsOf("app")
	if pre := ops[len(ops)-1]; pre.Export || pre.Remove || pre.Plan != nil {
		t.Errorf("the destroy preview %+v exports, removes or is constrained", pre)
	}
	v, err := h.d.Stack("app")
	if err != nil || v.Status.Health.Status != model.HealthAwaitingApproval || !strings.Contains(n.kinds(), notify.ApprovalNeeded) {
		t.Fatalf("stack %+v %v, events %s", v.Status, err, n.kinds())
	}
	if u, _ := h.d.Update(g.Update); u.Type != model.UpdatePreview || !strings.Contains(u.Message, "destroy plan 0000000000000002 awaits approval") {
		t.Errorf("the destroy preview's update = %+v", u)
	}

	// Approved, but the state moved: refused, asked again.
	if err := h.d.Approve("app", "0000000000000002", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("a new destroy plan", awaiting("0000000000000003"))
	if g := h.gate("app"); !strings.Contains(g.Refused, "the saved plan no longer holds") {
		t.Errorf("the new plan does not say why the approved one was not run: %+v", g)
	}
	if _, err := h.d.Stack("app"); err != nil {
		t.Fatal("a refused destroy forgot the stack")
	}

	// Approved: destroyed with its plan, then forgotten.
	if err := h.d.Approve("app", "digest-3", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("forgotten", func() bool { _, err := h.d.Stack("app"); return err != nil })
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,destroy-preview+plan,destroy@0000000000000002,destroy-preview+plan,destroy@0000000000000003" {
		t.Fatalf("operations %s", got)
	}
	ops = r.opsOf("app")
	if last := ops[len(ops)-1]; !last.Remove || last.PreviewOnly {
		t.Errorf("the approved destroy %+v does not remove the stack", last)
	}
	ups := h.store.updatesOf("app")
	i := slices.IndexFunc(ups, func(u model.Update) bool { return u.Type == model.UpdateDestroy && u.State == model.UpdateSucceeded })
	if i < 0 || ups[i].Reason != "Approved by alice: destroy plan 0000000000000003" {
		t.Errorf("history %+v, want the destroy approved by alice", ups)
	}
}

// TestGateDestroySuperseded: a stack added back to the config while its
// destroy waits keeps its resources: the destroy plan is discarded and
// nothing is destroyed. A stack removed without destroyOnFinalize is
// forgotten without a preview, approval or not.
func TestGateDestroySuperseded(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	const other = "  - {name: other, stack: dev, projectRepo: https://git.example/o.git, branch: main, approval: {required: true}}\n"
	cfg := destroyable("    approval: {when: [delete]}\n") + other
	h := newHarness(t, cfg, func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.fetcher.set("https://git.example/o.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })
	h.eventually("other awaits approval", func() bool { g := h.gate("other"); return g != nil && g.State == model.GateAwaiting })
	r.setSteps(model.Step{Op: "delete", URN: fileURN, Type: "stackdtest:index:File"})

	if err := h.d.Apply(h.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	h.eventually("the destroy awaits approval", func() bool {
		g := h.gate("app")
		return g != nil && g.State == model.GateAwaiting && g.Type == model.UpdateDestroy
	})
	plan := h.gate("app").Plan.ID
	h.eventually("other forgotten", func() bool { _, err := h.d.Stack("other"); return err != nil })
	if got := r.kinds("other"); got != "preview+plan" {
		t.Errorf("other, removed without destroyOnFinalize, ran %s", got)
	}

	if err := h.d.Apply(h.parse(cfg)); err != nil {
		t.Fatal(err)
	}
	h.eventually("back and Ready", func() bool { return h.ready("app") && h.gate("app") == nil })
	if !r.wasDiscarded(plan) {
		t.Error("the superseded destroy plan was not discarded")
	}
	time.Sleep(100 * time.Millisecond)
	for _, op := range r.opsOf("app") {
		if op.Type == model.UpdateDestroy && !op.PreviewOnly {
			t.Fatalf("a destroy ran: %s", r.kinds("app"))
		}
	}
}

// recordingPolicies is denyDeletes that records what it judged.
type recordingPolicies struct {
	mu  sync.Mutex
	ins []model.PolicyInput
}

func (p *recordingPolicies) Evaluate(ctx context.Context, in model.PolicyInput) (model.PolicyVerdict, error) {
	p.mu.Lock()
	p.ins = append(p.ins, in)
	p.mu.Unlock()
	return denyDeletes{}.Evaluate(ctx, in)
}

func (p *recordingPolicies) operations() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ops []string
	for _, in := range p.ins {
		ops = append(ops, in.Operation+"/"+in.Labels["env"])
	}
	return strings.Join(ops, ",")
}

// TestGateDestroyPolicyDenied: with policies, a removed stack's destroy
// is previewed and judged as a destroy, with the stack's labels; a
// denied destroy stalls the stack, still listed as being removed, with
// PolicyDenied, and destroys nothing. A sync request judges it again.
// Without policies or approval, the destroy runs as it is.
func TestGateDestroyPolicyDenied(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	p := &recordingPolicies{}
	h := newHarness(t, destroyable("    labels: {env: prod}\n"), func(o *Options) { o.Runner, o.Policies = r, p })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })

	r.setSteps(model.Step{Op: "delete", URN: fileURN, Type: "stackdtest:index:File"})
	if err := h.d.Apply(h.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	h.eventually("denied", func() bool { return h.stalled("app", model.ReasonPolicyDenied) })
	g := h.gate("app")
	if g.Type != model.UpdateDestroy || g.State != model.GatePolicyDenied || g.Plan != nil || !strings.Contains(g.Reason, "denied by policy: files: no deleting "+fileURN) {
		t.Fatalf("gate %+v", g)
	}
	if got := p.operations(); got != "up/prod,destroy/prod" {
		t.Errorf("judged %s, want the up, then the destroy, with the stack's labels", got)
	}
	if !r.wasDiscarded("0000000000000002") {
		t.Error("the denied destroy's plan was not discarded")
	}
	time.Sleep(100 * time.Millisecond)
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,destroy-preview+plan" {
		t.Fatalf("operations %s, want nothing destroyed", got)
	}
	if rec, err := h.store.Stack("app"); err != nil || !rec.Removed {
		t.Fatalf("the denied stack is not kept as being removed: %+v %v", rec, err)
	}

	// The policy allows it now; a sync request judges it again.
	r.setSteps(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	if _, err := h.d.Sync("app"); err != nil {
		t.Fatal(err)
	}
	h.eventually("destroyed", func() bool { _, err := h.d.Stack("app"); return err != nil })
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,destroy-preview+plan,destroy-preview+plan,destroy@0000000000000003" {
		t.Fatalf("operations %s", got)
	}

	// No policies, no approval: the destroy as before, without a preview.
	h2 := newHarness(t, destroyable(""), nil)
	h2.fetcher.set("https://git.example/app.git", sha1, nil)
	h2.start()
	h2.eventually("deployed", func() bool { return h2.ready("app") })
	if err := h2.d.Apply(h2.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	h2.eventually("destroyed", func() bool { _, err := h2.d.Stack("app"); return err != nil })
	var kinds []string
	for _, op := range h2.runner.opsOf("app") {
		kinds = append(kinds, fmt.Sprintf("%s/%v/%v", op.Type, op.PreviewOnly, op.Plan != nil))
	}
	if got := strings.Join(kinds, ","); got != "up/false/false,destroy/false/false" {
		t.Errorf("operations %s, want the up and the destroy alone", got)
	}
}

// TestGateDestroyNothingThere: the destroy preview of a Pulumi stack that
// does not exist has nothing to destroy: the removed stack is forgotten,
// and no destroy runs.
func TestGateDestroyNothingThere(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	h := newHarness(t, destroyable("    approval: {required: true}\n"), func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("awaiting approval", func() bool { g := h.gate("app"); return g != nil && g.State == model.GateAwaiting })
	if err := h.d.Approve("app", "0000000000000001", "alice"); err != nil {
		t.Fatal(err)
	}
	h.eventually("deployed", func() bool { return h.ready("app") })
	r.setFail("app", fmt.Errorf("stack app: %w", ErrStackNotFound))
	if err := h.d.Apply(h.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	h.eventually("forgotten", func() bool { _, err := h.d.Stack("app"); return err != nil })
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,destroy-preview+plan" {
		t.Fatalf("operations %s, want the destroy preview alone", got)
	}
}

// TestGateDestroyAfterRestart: a stack removed while stackd was down has
// no last spec in memory; its record kept the approval, so its destroy
// still waits for approval.
func TestGateDestroyAfterRestart(t *testing.T) {
	r := newPlanRunner(model.Step{Op: "update", URN: fileURN, Type: "stackdtest:index:File"})
	h := newHarness(t, destroyable("    approval: {when: [delete]}\n"), func(o *Options) { o.Runner = r })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })
	if err := h.d.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	r.setSteps(model.Step{Op: "delete", URN: fileURN, Type: "stackdtest:index:File"})
	h2 := newHarness(t, "stacks: []\n", func(o *Options) { o.Store, o.Runner, o.DataDir = h.store, r, h.dir })
	h2.start()
	h2.eventually("the destroy awaits approval", func() bool {
		g := h2.gate("app")
		return g != nil && g.State == model.GateAwaiting && g.Type == model.UpdateDestroy
	})
	if got := r.kinds("app"); got != "preview+plan,up@0000000000000001,destroy-preview+plan" {
		t.Fatalf("operations %s, want nothing destroyed", got)
	}
}
