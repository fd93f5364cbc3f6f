package runner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/sandbox"
)

// newSandboxedHarness is a harness whose runner confines every process
// tree with the real Landlock sandbox, opening to programs nothing but
// the directory of the File resource (the --sandbox-rw of `make run`):
// neither the data dir nor any parent of it. The test binary serves as
// the sandbox's wrapper, as stackd does.
func newSandboxedHarness(t *testing.T) *harness {
	t.Helper()
	bin := toolchainBin(t)
	if sandbox.ABI() < 1 {
		t.Fatal("the kernel does not enforce Landlock; the sandbox tests need it")
	}
	h := &harness{t: t, dataDir: t.TempDir(), project: t.TempDir(), bin: bin}
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	h.file = filepath.Join(out, "note.txt")
	if strings.HasPrefix(h.dataDir+"/", out+"/") || strings.HasPrefix(out+"/", h.dataDir+"/") {
		t.Fatalf("the data dir %s and the granted %s overlap", h.dataDir, out)
	}
	confiner, err := sandbox.New(sandbox.Options{ReadWrite: []string{out}})
	if err != nil {
		t.Fatal(err)
	}
	h.writeProgram(testProgram)
	h.r, err = New(context.Background(), Options{
		Bin:     bin,
		DataDir: h.dataDir,
		Env:     []string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"},
		Sandbox: confiner,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSandboxedOperations runs every kind of operation the daemon runs,
// under the default sandbox, on a program whose provider has its schema
// cached in PULUMI_HOME: each kind must find every path of its
// environment (HOME, TMPDIR, PULUMI_HOME) open to it, whichever
// directory it runs in. A read-only preview (a pull request's, Preview
// now, stackd diff) runs in a scratch copy of the stack's state; it once
// kept the stack's own PULUMI_HOME, which the sandbox does not open to
// the copy, and failed writing the provider's schema.
func TestSandboxedOperations(t *testing.T) {
	h := newSandboxedHarness(t)
	ws := func(content string) model.Workspace { return h.workspace(content, "secret-token-1") }
	previewSteps := func(name string, res model.Result) {
		t.Helper()
		for _, s := range res.Steps {
			if strings.HasSuffix(s.URN, "::note") && s.Op == "update" {
				return
			}
		}
		t.Errorf("%s: no update of the File among the steps %+v", name, res.Steps)
	}

	h.run(model.Operation{Workspace: ws("one"), Type: model.UpdateUp, Export: true})
	if got := h.onDisk(); got != "one" {
		t.Fatalf("after up the File holds %q, want one", got)
	}
	steps := []struct {
		name string
		op   model.Operation
		// check looks at the result; nil checks nothing more than that
		// the operation succeeded.
		check func(string, model.Result)
	}{
		{"preview", model.Operation{Workspace: ws("two"), Type: model.UpdatePreview}, previewSteps},
		{"read-only preview (pull request, Preview now, stackd diff)",
			model.Operation{Workspace: ws("two"), Type: model.UpdatePreview, ReadOnly: true, Diff: true}, previewSteps},
		{"saved-plan preview (approval)", model.Operation{Workspace: ws("two"), Type: model.UpdatePreview, SavePlan: true},
			func(name string, res model.Result) {
				previewSteps(name, res)
				if res.Plan == nil {
					t.Errorf("%s: no plan saved", name)
				}
			}},
		{"drift check", model.Operation{Workspace: ws("one"), Type: model.UpdateDrift}, nil},
		{"refresh", model.Operation{Workspace: ws("one"), Type: model.UpdateRefresh}, nil},
		{"destroy preview (destroy approval)", model.Operation{Workspace: ws("one"), Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true},
			func(name string, res model.Result) {
				if res.Plan == nil || len(res.Steps) == 0 {
					t.Errorf("%s: plan %v, steps %+v; want a plan and the deletes", name, res.Plan, res.Steps)
				}
			}},
	}
	for _, s := range steps {
		res, err := h.try(s.op)
		if err != nil {
			t.Errorf("%s: %v\nlog:\n%s", s.name, err, h.log.String())
			continue
		}
		if s.check != nil {
			s.check(s.name, res)
		}
	}
	if got := h.onDisk(); got != "one" {
		t.Errorf("the previews changed the File: %q", got)
	}

	plan := h.run(model.Operation{Workspace: ws("three"), Type: model.UpdatePreview, SavePlan: true}).Plan
	h.run(model.Operation{Workspace: ws("three"), Type: model.UpdateUp, Plan: plan})
	if got := h.onDisk(); got != "three" {
		t.Errorf("the up of a saved plan left %q, want three", got)
	}
	h.run(model.Operation{Workspace: ws("three"), Type: model.UpdateDestroy, Remove: true})
	if got := h.onDisk(); got != "" {
		t.Errorf("the destroy left the File: %q", got)
	}
}

// TestSandboxedReadOnlyPreviewOfNewStack previews a stack that does not
// exist yet (a pull request that adds it, a review stack's first plan)
// under the default sandbox: it runs on the scratch copy's own backend.
func TestSandboxedReadOnlyPreviewOfNewStack(t *testing.T) {
	h := newSandboxedHarness(t)
	res, err := h.try(model.Operation{Workspace: h.workspace("new", "secret-token-1"), Type: model.UpdatePreview, ReadOnly: true, Diff: true})
	if err != nil {
		t.Fatalf("read-only preview: %v\nlog:\n%s", err, h.log.String())
	}
	if res.Changes["create"] == 0 {
		t.Errorf("the preview of a new stack creates nothing: %v", res.Changes)
	}
	if h.onDisk() != "" {
		t.Error("a preview created the File")
	}
}

// TestSandboxedPolicySteps reveals secret inputs for the policies under
// the default sandbox, in each kind of judged preview: the state's export
// and the decryption of the plan run in the stack's engine domain, and
// so does a read-only preview's, in its scratch copy.
func TestSandboxedPolicySteps(t *testing.T) {
	h := newSandboxedHarness(t)
	h.writeProgram(secretPathProgram(h.file))
	h.run(model.Operation{Workspace: tokenOnly(h, secretOne), Type: model.UpdateUp})
	ws := tokenOnly(h, secretTwo)
	for name, op := range map[string]model.Operation{
		"saved-plan preview": {Workspace: ws, Type: model.UpdatePreview, SavePlan: true, Judged: true},
		"read-only preview":  {Workspace: ws, Type: model.UpdatePreview, ReadOnly: true, Diff: true, Judged: true},
		"destroy preview":    {Workspace: ws, Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true, Judged: true},
	} {
		res, err := h.try(op)
		if err != nil {
			t.Errorf("%s: %v\nlog:\n%s", name, err, h.log.String())
			continue
		}
		want := secretTwo // the new content, from the plan
		if op.Type == model.UpdateDestroy {
			want = secretOne // the old content, from the state
		}
		i := slices.IndexFunc(res.PolicySteps, func(s model.Step) bool { return strings.HasSuffix(s.URN, "::key") })
		if i < 0 || res.PolicySteps[i].Old["path"] != h.file || !slices.Contains(res.PolicySecrets, want) {
			t.Errorf("%s: judged steps %+v, secrets %q; want the path and %s in clear", name, res.PolicySteps, res.PolicySecrets, want)
		}
	}
}
