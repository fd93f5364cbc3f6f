package runner

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// TestProviderOnPathInstalled: a provider on the CLI's PATH is installed
// into the shared plugin cache under the version it reports, programs use
// it from there, and no operation's output says "using … from $PATH". A
// second runner on the same data dir finds it installed.
func TestProviderOnPathInstalled(t *testing.T) {
	h := newHarness(t, testProgram)
	cached := filepath.Join(h.dataDir, "pulumi-home", "plugins", "resource-stackdtest-v0.1.0", "pulumi-resource-stackdtest")
	if same, err := sameContent(filepath.Join(h.bin, "pulumi-resource-stackdtest"), cached); err != nil || !same {
		t.Fatalf("the provider on PATH is not in the plugin cache as %s (same=%v, err=%v)", cached, same, err)
	}
	h.run(model.Operation{Type: model.UpdateUp, Workspace: h.workspace("hello", "tok")})
	if got := h.onDisk(); got != "hello" {
		t.Fatalf("file = %q", got)
	}
	if strings.Contains(h.log.String(), "$PATH") {
		t.Errorf("the operation's output mentions $PATH:\n%s", h.log.String())
	}
	installs := strings.Count(h.allCalls(), "plugin install resource stackdtest 0.1.0")
	if installs != 1 {
		t.Fatalf("%d installs of the provider, want 1:\n%s", installs, h.allCalls())
	}
	if _, err := New(context.Background(), Options{Bin: h.bin, DataDir: h.dataDir}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(h.allCalls(), "plugin install resource stackdtest 0.1.0"); n != installs {
		t.Errorf("a second start installed the provider again:\n%s", h.allCalls())
	}
}

// TestProjectPluginFromPath: a provider the project declares in
// Pulumi.yaml (plugins.providers, with a path in the checkout) is the
// one the program runs.
func TestProjectPluginFromPath(t *testing.T) {
	h := newHarness(t, testProgram)
	dir := filepath.Join(h.project, "providers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(toolchainBin(t), "pulumi-resource-stackdtest"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pulumi-resource-stackdtest"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Without it in the cache, only the declaration can serve it.
	if err := os.RemoveAll(filepath.Join(h.dataDir, "pulumi-home", "plugins", "resource-stackdtest-v0.1.0")); err != nil {
		t.Fatal(err)
	}
	h.writeProgram(testProgram + "plugins:\n  providers:\n    - name: stackdtest\n      path: ./providers\n")
	h.r.opts.ProjectPlugins = true
	h.run(model.Operation{Type: model.UpdateUp, Workspace: h.workspace("declared", "tok")})
	if got := h.onDisk(); got != "declared" {
		t.Fatalf("file = %q", got)
	}
}

// TestProjectPluginMissing: a declared provider that is not where its
// path says fails the operation before pulumi runs, naming Pulumi.yaml's
// line and column and the plugin.
func TestProjectPluginMissing(t *testing.T) {
	h := newHarness(t, testProgram+"plugins:\n  providers:\n    - name: stackdtest\n      path: ./providers\n")
	h.r.opts.ProjectPlugins = true
	before := len(h.allCalls())
	_, err := h.try(model.Operation{Type: model.UpdateUp, Workspace: h.workspace("x", "tok")})
	want := `stack test: Pulumi.yaml:23:7: plugins.providers[0]: stackdtest: path "./providers" holds no pulumi-resource-stackdtest`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if len(h.allCalls()) != before {
		t.Errorf("pulumi ran: %s", h.allCalls()[before:])
	}
}

// TestProjectPluginRefused: unless the operator allows them, a plugin a
// project declares is refused before pulumi runs, naming Pulumi.yaml's
// line and column and the field: the engine would run it beside itself,
// out of the program's domain.
func TestProjectPluginRefused(t *testing.T) {
	for kind, decl := range map[string]string{
		"providers": "plugins:\n  providers:\n    - name: stackdtest\n      path: ./providers\n",
		"languages": "plugins:\n  languages:\n    - name: yaml\n      path: ./lang\n",
	} {
		h := newHarness(t, testProgram+decl)
		before := len(h.allCalls())
		_, err := h.try(model.Operation{Type: model.UpdateUp, Workspace: h.workspace("x", "tok")})
		want := "stack test: Pulumi.yaml:23:7: plugins." + kind + "[0]: a plugin committed with the program would run beside the engine"
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "--allow-project-plugins") {
			t.Errorf("%s: err = %v, want %s…", kind, err, want)
		}
		if len(h.allCalls()) != before {
			t.Errorf("%s: pulumi ran: %s", kind, h.allCalls()[before:])
		}
	}
}

// TestCheckProjectPlugin covers each way a declaration can be wrong.
func TestCheckProjectPlugin(t *testing.T) {
	work := t.TempDir()
	project := filepath.Join(work, "app")
	mkfile(t, filepath.Join(project, "bin", "pulumi-resource-good"), "x", 0o755)
	mkfile(t, filepath.Join(project, "bin", "pulumi-resource-plain"), "x", 0o644)
	for _, tt := range []struct {
		name, path, err string
	}{
		{"good", "bin", ""},
		{"good", "./bin/", ""},
		{"good", filepath.Join(project, "bin"), ""},
		{"", "bin", "name: missing"},
		{"good", "", "good: path: missing"},
		{"good", "../../elsewhere", `good: path "../../elsewhere" leads outside the checkout`},
		{"other", "bin", `other: path "bin" holds no pulumi-resource-other`},
		{"plain", "bin", `plain: path "bin": pulumi-resource-plain is not an executable file`},
	} {
		err := checkProjectPlugin(work, project, tt.name, tt.path)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s at %s: %v", tt.name, tt.path, err)
		case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
			t.Errorf("%s at %s: err = %v, want %s…", tt.name, tt.path, err, tt.err)
		}
	}
}

// TestProviderOnPathWithoutVersion: a provider on PATH whose schema
// cannot be read is not installed, and the log names it; the runner
// starts all the same.
func TestProviderOnPathWithoutVersion(t *testing.T) {
	real := toolchainBin(t)
	bin := t.TempDir()
	for _, name := range []string{"pulumi", "pulumi-language-yaml"} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	mkfile(t, filepath.Join(bin, "pulumi-resource-broken"), "#!/bin/sh\necho 'not a provider' >&2\nexit 3\n", 0o755)
	var log syncBuffer
	dataDir := t.TempDir()
	if _, err := New(context.Background(), Options{Bin: bin, DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "a provider on PATH is not installed into the plugin cache") ||
		!strings.Contains(log.String(), filepath.Join(bin, "pulumi-resource-broken")) {
		t.Errorf("the log does not name the provider:\n%s", log.String())
	}
	for _, name := range dirNames(t, filepath.Join(dataDir, "pulumi-home", "plugins")) {
		if strings.HasPrefix(name, "resource-broken") {
			t.Errorf("the plugin cache holds %s", name)
		}
	}
}
