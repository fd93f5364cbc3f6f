package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPrepareEngine: the engine directory holds the CLI (the same file as
// the toolchain's) and, for each plugin bundled with it, a link to the
// wrapper and one to the real plugin; whatever else it held goes, and a
// second run changes nothing.
func TestPrepareEngine(t *testing.T) {
	bin, dir := t.TempDir(), filepath.Join(t.TempDir(), "engine")
	mkfile(t, filepath.Join(bin, "pulumi"), "cli", 0o755)
	mkfile(t, filepath.Join(bin, "pulumi-language-yaml"), "yaml", 0o755)
	mkfile(t, filepath.Join(bin, "pulumi-notes.txt"), "not a plugin", 0o644)
	mkfile(t, filepath.Join(dir, "pulumi-language-gone"), "stale", 0o755)
	wrapper := filepath.Join(t.TempDir(), "stackd")
	for range 2 {
		if err := prepareEngine(bin, dir, wrapper); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := dirNames(t, dir), []string{".pulumi-language-yaml.real", "pulumi", "pulumi-language-yaml"}; !slices.Equal(got, want) {
		t.Fatalf("the engine directory holds %v, want %v", got, want)
	}
	a, _ := os.Stat(filepath.Join(bin, "pulumi"))
	b, _ := os.Stat(filepath.Join(dir, "pulumi"))
	if !os.SameFile(a, b) {
		t.Error("the engine's CLI is not a hard link to the toolchain's")
	}
	for link, want := range map[string]string{"pulumi-language-yaml": wrapper, ".pulumi-language-yaml.real": filepath.Join(bin, "pulumi-language-yaml")} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != want {
			t.Errorf("%s leads to %q (%v), want %s", link, got, err, want)
		}
	}
	if err := prepareEngine(t.TempDir(), dir, wrapper); err == nil {
		t.Error("a toolchain without pulumi is no error")
	}
}

// TestSameFileCopies: where no hard link can be made, the CLI is copied,
// with its time, and a copy of the same size and time is kept.
func TestSameFileCopies(t *testing.T) {
	src := filepath.Join(t.TempDir(), "pulumi")
	mkfile(t, src, "cli", 0o755)
	si, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "pulumi")
	if err := copyExecutable(src, dst, si); err != nil {
		t.Fatal(err)
	}
	if err := sameFile(src, dst); err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dst)
	if err != nil || os.SameFile(si, di) || !di.ModTime().Equal(si.ModTime()) || readFileString(t, dst) != "cli" {
		t.Errorf("the copy: %v %v", di, err)
	}
}

// TestProgramEnv: the program gets its own HOME, TMPDIR and PULUMI_HOME
// in place of the engine's, but for each one the operator (--env-file)
// or the stack (envRefs) sets.
func TestProgramEnv(t *testing.T) {
	w := &workspace{dir: "/d/workspaces/s"}
	for _, tt := range []struct {
		opts, stack []string
		want        []string
	}{
		{nil, nil, []string{"HOME=/d/workspaces/s/program/home", "TMPDIR=/d/workspaces/s/program/tmp", "PULUMI_HOME=/d/workspaces/s/program/pulumi-home"}},
		{[]string{"HOME=/srv/home"}, []string{"TMPDIR"}, []string{"PULUMI_HOME=/d/workspaces/s/program/pulumi-home"}},
	} {
		r := &Runner{opts: Options{Env: tt.opts}}
		w.Env = map[string]string{}
		for _, k := range tt.stack {
			w.Env[k] = "/mine"
		}
		if got := r.programEnv(w); !slices.Equal(got, tt.want) {
			t.Errorf("%v %v: %v, want %v", tt.opts, tt.stack, got, tt.want)
		}
	}
}
