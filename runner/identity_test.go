package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// TestStateKeyedByStackName: a stack whose program names another stack's
// project, with the same Pulumi stack name (prod repeats across teams),
// gets a state and a passphrase of its own: its up must not see, let
// alone delete, the other stack's resources. They were keyed by the
// backend, the Pulumi stack and the project, which the program chooses.
func TestStateKeyedByStackName(t *testing.T) {
	h := newSandboxedHarness(t)
	h.run(model.Operation{Workspace: h.workspace("victim's", "secret-token-1"), Type: model.UpdateUp})

	evil := t.TempDir()
	mine := filepath.Join(filepath.Dir(h.file), "evil.txt")
	program := strings.ReplaceAll(testProgram, "note", "mine")
	if err := os.WriteFile(filepath.Join(evil, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := h.workspace("evil", "secret-token-2")
	ws.Name, ws.ProjectDir, ws.Config[0].Value = "evil", evil, mine
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	if got := h.onDisk(); got != "victim's" {
		t.Fatalf("the other stack's up changed the victim's File: %q", got)
	}
	for _, dir := range []string{"backends", "passphrases"} {
		if got := dirNames(t, filepath.Join(h.dataDir, dir)); strings.Join(got, " ") != "evil test" {
			t.Errorf("%s holds %v, want one each, by the stacks' names", dir, got)
		}
	}
}

// TestProjectChangeNeedsConfirmation: a program that renames its project
// (another Pulumi stack: on a shared backend maybe another team's) is
// refused until the stack's config names the new project; a program
// that names another project than the config's is refused.
func TestProjectChangeNeedsConfirmation(t *testing.T) {
	h := newSandboxedHarness(t)
	h.run(model.Operation{Workspace: h.workspace("one", "secret-token-1"), Type: model.UpdateUp})
	h.writeProgram(strings.Replace(testProgram, "name: runnertest", "name: renamed", 1))
	_, err := h.try(model.Operation{Workspace: h.workspace("two", "secret-token-1"), Type: model.UpdateUp})
	want := `stack test: the program's project changed from "runnertest" to "renamed" (Pulumi.yaml name:)`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "project: renamed") {
		t.Fatalf("err = %v, want %s…", err, want)
	}
	ws := h.workspace("two", "secret-token-1")
	ws.Config[1].Key, ws.Project = "renamed:content", "other"
	if _, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp}); err == nil ||
		!strings.Contains(err.Error(), `the program names the project "renamed" (Pulumi.yaml name:), and the stack's config says project "other"`) {
		t.Fatalf("a program naming another project than the config's: %v", err)
	}
	if got := h.onDisk(); got != "one" {
		t.Fatalf("a refused program changed the File: %q", got)
	}
	ws.Project = "renamed"
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	ws.Project = ""
	h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview})
}

// TestStateKeyMigration: a data dir of an earlier version kept a stack's
// state and passphrase under the digest of its identity; the stack whose
// marker says so takes them under its name, and goes on with them.
func TestStateKeyMigration(t *testing.T) {
	h := newSandboxedHarness(t)
	h.run(model.Operation{Workspace: h.workspace("one", "secret-token-1"), Type: model.UpdateUp})
	w, err := h.r.workspace(h.workspace("one", "secret-token-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := h.r.identity(w)
	for _, dir := range []string{"backends", "passphrases"} {
		if err := os.Rename(filepath.Join(h.dataDir, dir, "test"), filepath.Join(h.dataDir, dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	res := h.run(model.Operation{Workspace: h.workspace("two", "secret-token-1"), Type: model.UpdateUp})
	if res.Changes["update"] != 1 || h.onDisk() != "two" {
		t.Errorf("after the move: changes %v, File %q; want the File updated in place", res.Changes, h.onDisk())
	}
	for _, dir := range []string{"backends", "passphrases"} {
		if got := dirNames(t, filepath.Join(h.dataDir, dir)); strings.Join(got, " ") != "test" {
			t.Errorf("%s holds %v, want the stack's name only", dir, got)
		}
	}
}

// TestClaimedPulumiStack: on a backend other than the data dir's, the
// first stack to run on a Pulumi stack claims it; another stackd stack
// whose program names the same project and stack is refused, naming the
// first, until the first is removed with its Pulumi stack.
func TestClaimedPulumiStack(t *testing.T) {
	h := newSandboxedHarness(t)
	backend := "file://" + t.TempDir()
	first := h.workspace("first", "secret-token-1")
	first.Backend = backend
	h.run(model.Operation{Workspace: first, Type: model.UpdateUp})

	second := first
	second.Name = "second"
	_, err := h.try(model.Operation{Workspace: second, Type: model.UpdateUp})
	want := "stack second: the Pulumi stack dev of project runnertest on " + backend + " is stack test's, which ran on it first"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want %s…", err, want)
	}
	h.run(model.Operation{Workspace: first, Type: model.UpdateDestroy, Remove: true})
	h.run(model.Operation{Workspace: second, Type: model.UpdateUp})
	if got := h.onDisk(); got != "first" {
		t.Errorf("the File holds %q", got)
	}
}

// mapClaims are claims in memory, as a cluster's replicas share them.
type mapClaims struct {
	mu     sync.Mutex
	owners map[string]string
}

func (c *mapClaims) Claim(_ context.Context, identity, stack string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if owner, ok := c.owners[identity]; ok {
		return owner, nil
	}
	c.owners[identity] = stack
	return stack, nil
}

func (c *mapClaims) Release(_ context.Context, identity, stack string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners[identity] == stack {
		delete(c.owners, identity)
	}
	return nil
}

// TestSharedClaims: runners of two data dirs (two replicas) that share
// their claims key a Pulumi stack alike, so that the second stack is
// refused on the other runner, and the key holds nothing of the backend
// URL's credentials: the same backend with another password or query
// is the same Pulumi stack.
func TestSharedClaims(t *testing.T) {
	shared := &mapClaims{owners: map[string]string{}}
	var runners []*Runner
	for range 2 {
		r, err := New(context.Background(), Options{Bin: toolchainBin(t), DataDir: t.TempDir(), Claims: shared})
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
	}
	ws := func(name, backend string) *workspace {
		return &workspace{Workspace: model.Workspace{Name: name, Stack: "prod"}, backend: backend, project: "app"}
	}
	ctx := context.Background()
	if err := runners[0].claim(ctx, ws("first", "postgres://u:secret-1@db:5432/pulumi?sslmode=disable")); err != nil {
		t.Fatal(err)
	}
	err := runners[1].claim(ctx, ws("second", "postgres://v:secret-2@db:5432/pulumi?password=secret-3"))
	want := "stack second: the Pulumi stack prod of project app on postgres://db:5432/pulumi is stack first's, which ran on it first"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want %s…", err, want)
	}
	if err := runners[1].claim(ctx, ws("second", "postgres://db:5432/other")); err != nil {
		t.Errorf("another database: %v", err)
	}
	runners[1].unclaim(ctx, ws("second", "postgres://db:5432/pulumi"))
	runners[0].unclaim(ctx, ws("first", "postgres://db:5432/pulumi"))
	if err := runners[1].claim(ctx, ws("second", "postgres://db:5432/pulumi")); err != nil {
		t.Errorf("after the first's release: %v", err)
	}
	if len(shared.owners) != 2 {
		t.Errorf("claims: %v", shared.owners)
	}
	for id := range shared.owners {
		if len(id) != 64 || strings.Contains(id, "secret") {
			t.Errorf("claim key %q", id)
		}
	}
}
