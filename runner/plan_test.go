package runner

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// TestRunSavedPlan saves plans with the real CLI and applies them: an up
// constrained to its plan applies it and deletes it; a plan refuses to
// apply after the config, the state or the resource changed.
func TestRunSavedPlan(t *testing.T) {
	h := newHarness(t, testProgram)
	h.run(model.Operation{Workspace: h.workspace("one", secretOne), Type: model.UpdateUp})

	// The preview saves its plan, mode 0600, and changes nothing.
	ws := h.workspace("two", secretOne)
	plan := h.savePlan(ws)
	if got := h.onDisk(); got != "one" {
		t.Fatalf("a preview changed the file to %q", got)
	}
	// The up constrained to it applies it and deletes it.
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: plan})
	if got := h.onDisk(); got != "two" {
		t.Fatalf("after the up with its plan the file holds %q, want two", got)
	}
	h.wantNoPlan(plan)
	if calls := h.allCalls(); strings.Contains(calls, secretOne) {
		t.Fatal("a secret reached the argv")
	}
	// A plan that changes nothing applies as well.
	plan = h.savePlan(ws)
	if res := h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: plan}); res.Changes["same"] != 2 {
		t.Errorf("a no-change plan applied %v", res.Changes)
	}

	// A config change after the preview: refused, nothing applied.
	plan = h.savePlan(h.workspace("three", secretOne))
	_, err := h.try(model.Operation{Workspace: h.workspace("four", secretOne), Type: model.UpdateUp, Plan: plan})
	wantStale(t, err, "config")
	if got := h.onDisk(); got != "two" {
		t.Fatalf("a refused plan changed the file to %q", got)
	}
	// So is a changed secret.
	plan = h.savePlan(h.workspace("three", secretOne))
	_, err = h.try(model.Operation{Workspace: h.workspace("three", secretTwo), Type: model.UpdateUp, Plan: plan})
	wantStale(t, err, "config")

	// The state moved after the preview (another up): refused.
	ws = h.workspace("three", secretOne)
	plan = h.savePlan(ws)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	_, err = h.try(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: plan})
	wantStale(t, err, "state")

	// A newer plan supersedes an older one: the older is gone.
	older := h.savePlan(h.workspace("five", secretOne))
	newer := h.savePlan(h.workspace("five", secretOne))
	h.wantNoPlan(older)
	_, err = h.try(model.Operation{Workspace: h.workspace("five", secretOne), Type: model.UpdateUp, Plan: older})
	wantStale(t, err, "gone")
	if err := h.r.DiscardPlan("test", newer.ID); err != nil {
		t.Fatal(err)
	}
	h.wantNoPlan(newer)

	// With refresh, as a stack with refresh: true or a drift remediation
	// runs: the plan applies when nothing moved.
	ws = h.workspace("refreshed", secretOne)
	refresh := func(op *model.Operation) { op.Refresh = true }
	plan = h.savePlan(ws, refresh)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: plan, Refresh: true})
	if got := h.onDisk(); got != "refreshed" {
		t.Fatalf("after the refreshing up with its plan the file holds %q", got)
	}

	// A hand edit of the content the plan sets anyway: the plan holds,
	// and the up sets what was approved.
	ws = h.workspace("approved", secretOne)
	plan = h.savePlan(ws, refresh)
	if err := os.WriteFile(h.file, []byte("edited by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: plan, Refresh: true})
	if got := h.onDisk(); got != "approved" {
		t.Fatalf("after a hand edit and the up with its plan the file holds %q", got)
	}

	// The resource was deleted out of band after the preview: the
	// refreshing up would create it, which the plan (an update) does not
	// allow. The engine stops and says why.
	ws = h.workspace("six", secretOne)
	plan = h.savePlan(ws, refresh)
	if err := os.Remove(h.file); err != nil {
		t.Fatal(err)
	}
	_, err = h.try(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: plan, Refresh: true})
	wantStale(t, err, "resources changed")
	t.Logf("the refused up: %v", err)
	if got := h.onDisk(); got != "" {
		t.Fatalf("an up outside its plan wrote the file: %q", got)
	}
	h.wantNoPlan(plan)
}

// TestRunDestroyPlan previews a destroy with the real CLI: the preview
// changes nothing, its steps are the deletes, and its plan binds the
// state and config; the destroy with that plan runs only while they are
// unchanged.
func TestRunDestroyPlan(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("one", secretOne)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	preview := model.Operation{Workspace: ws, Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true,
		Remove: true, ContinueOnError: true}

	res := h.run(preview)
	if got := h.onDisk(); got != "one" {
		t.Fatalf("a destroy preview changed the file to %q", got)
	}
	p := res.Plan
	if p == nil || !validPlanID(p.ID) || p.Digest == "" || p.Config == "" || p.State == "" {
		t.Fatalf("the destroy preview bound no complete plan: %+v", p)
	}
	ops := map[string]string{}
	for _, s := range res.Steps {
		if s.Op != "delete" {
			t.Errorf("step %+v, want only deletes", s)
		}
		ops[s.Type] = s.Op
	}
	if ops["stackdtest:index:File"] != "delete" || ops["pulumi:pulumi:Stack"] != "delete" {
		t.Fatalf("steps %+v, want the File's and the stack's deletes", res.Steps)
	}
	for _, s := range res.Steps {
		if s.Type == "stackdtest:index:File" && (s.Old["path"] != h.file || s.New != nil) {
			t.Errorf("the File's delete %+v, want its old inputs", s)
		}
	}
	if res.Changes["delete"] != 2 {
		t.Errorf("changes %v, want 2 deletes", res.Changes)
	}
	// The last process: the plan binds the state as the checkpoint holds
	// it, read by no process.
	last := h.processes()
	if cmd := last[len(last)-1]; !strings.Contains(cmd, "destroy --preview-only ") || strings.Contains(cmd, "--remove") ||
		strings.Contains(cmd, "--continue-on-error") {
		t.Errorf("the destroy preview ran %q", cmd)
	}

	// The state moved after the preview (an up): refused, nothing destroyed.
	p = h.run(model.Operation{Workspace: h.workspace("two", secretOne), Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true}).Plan
	h.run(model.Operation{Workspace: h.workspace("two", secretOne), Type: model.UpdateUp})
	_, err := h.try(model.Operation{Workspace: h.workspace("two", secretOne), Type: model.UpdateDestroy, Plan: p})
	wantStale(t, err, "state")
	if got := h.onDisk(); got != "two" {
		t.Fatalf("a refused destroy left the file as %q", got)
	}
	// So is a changed config.
	p = h.run(model.Operation{Workspace: h.workspace("two", secretOne), Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true}).Plan
	_, err = h.try(model.Operation{Workspace: h.workspace("two", secretTwo), Type: model.UpdateDestroy, Plan: p})
	wantStale(t, err, "config")
	if got := h.onDisk(); got != "two" {
		t.Fatalf("a refused destroy left the file as %q", got)
	}

	// Unchanged: the destroy runs.
	ws = h.workspace("two", secretOne)
	p = h.run(model.Operation{Workspace: ws, Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true}).Plan
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdateDestroy, Plan: p})
	if got := h.onDisk(); got != "" || res.Changes["delete"] != 2 {
		t.Fatalf("after the destroy with its plan the file holds %q, changes %v", got, res.Changes)
	}
	// A destroy's plan has no file: an up cannot apply it.
	_, err = h.try(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: p})
	wantStale(t, err, "the plan file is gone")
}

// savePlan runs a preview of ws that saves its plan and checks the file.
func (h *harness) savePlan(ws model.Workspace, opts ...func(*model.Operation)) *model.Plan {
	h.t.Helper()
	op := model.Operation{Workspace: ws, Type: model.UpdatePreview, SavePlan: true}
	for _, o := range opts {
		o(&op)
	}
	res := h.run(op)
	p := res.Plan
	if p == nil || p.ID == "" || p.Digest == "" || p.Config == "" || p.State == "" {
		h.t.Fatalf("the preview saved no complete plan: %+v", p)
	}
	fi, err := os.Stat(h.planFile(p))
	if err != nil {
		h.t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		h.t.Fatalf("the plan file has mode %v, want 0600", fi.Mode().Perm())
	}
	if found := filesContaining(h.t, h.dataDir, secretOne); len(found) > 0 {
		h.t.Fatalf("a secret is in clear in %v", found)
	}
	return p
}

func (h *harness) planFile(p *model.Plan) string {
	w := &workspace{dir: h.dataDir + "/workspaces/test"}
	return w.planPath(p.ID)
}

func (h *harness) wantNoPlan(p *model.Plan) {
	h.t.Helper()
	if _, err := os.Stat(h.planFile(p)); !errors.Is(err, os.ErrNotExist) {
		h.t.Fatalf("plan %s is still there: %v", p.ID, err)
	}
}

// wantStale checks that err is daemon.ErrPlanStale and says why.
func wantStale(t *testing.T, err error, why string) {
	t.Helper()
	if !errors.Is(err, daemon.ErrPlanStale) || !strings.Contains(err.Error(), why) {
		t.Fatalf("got %v, want the plan refused because of its %s", err, why)
	}
}

// BenchmarkSavedPlan prints what change control adds to an update that
// changes one resource: a plain up against a preview that saves its
// plan followed by the up constrained to it (with the checks of the plan
// file, the config and the state).
func BenchmarkSavedPlan(b *testing.B) {
	h, _ := benchHarness(b)
	n := 0
	next := func() model.Workspace {
		n++
		return h.workspace("content-"+strconv.Itoa(n), secretOne)
	}
	b.Run("up", func(b *testing.B) {
		for b.Loop() {
			h.run(model.Operation{Workspace: next(), Type: model.UpdateUp})
		}
	})
	b.Run("preview+plan+up", func(b *testing.B) {
		for b.Loop() {
			ws := next()
			res := h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview, SavePlan: true})
			h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: res.Plan})
		}
	})
}
