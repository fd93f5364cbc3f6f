package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitCheckout writes files into a directory that plays a Git config
// source's checkout, and returns it.
func gitCheckout(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func fsStack(path string) string {
	return fmt.Sprintf(`stacks:
  - name: app
    stack: dev
    projectRepo: https://git.example/app.git
    branch: main
    envRefs:
      TOKEN: {type: FS, filesystem: {path: %q}}
`, path)
}

// TestGitConfigFSConfined: a config from Git may reference only files of
// its own repository; the same config from a local file may reference
// any file, as before.
func TestGitConfigFSConfined(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"../../../../etc/passwd", false},
		{"/etc/passwd", false},
		{"../../outside", false},
		{"secrets/token", true},
		{"../env/secrets/token", true},
	} {
		root := gitCheckout(t, map[string]string{"env/stacks.yaml": fsStack(tc.path), "env/secrets/token": "t0k3n", "secrets/token": "t"})
		_, diags, err := LoadInputs([]Input{{Source: "git+https://git.example/infra.git//env", Path: filepath.Join(root, "env"),
			Shown: "https://git.example/infra.git//env", Root: root}})
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v %v", tc.path, err, diags)
			continue
		}
		if !tc.ok && !strings.Contains(fmt.Sprint(diags), "https://git.example/infra.git//env/stacks.yaml:7:") ||
			!tc.ok && !strings.Contains(fmt.Sprint(diags), "envRefs.TOKEN.filesystem.path") {
			t.Errorf("%s: diagnostics do not name file:line:col and the field: %v", tc.path, diags)
		}
		// From a local file, the same config loads.
		if _, _, err := LoadInputs([]Input{{Source: "local", Path: filepath.Join(root, "env")}}); err != nil {
			t.Errorf("%s from a local file: %v", tc.path, err)
		}
	}
}

// TestGitConfigSymlinkOutside: a config document of a Git source that is
// a symbolic link leading out of the checkout is not read.
func TestGitConfigSymlinkOutside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "stacks.yaml")
	if err := os.WriteFile(outside, []byte(fsStack("x")), 0o644); err != nil {
		t.Fatal(err)
	}
	root := gitCheckout(t, nil)
	if err := os.Symlink(outside, filepath.Join(root, "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	_, diags, err := LoadInputs([]Input{{Source: "git", Path: root, Root: root, Shown: "repo"}})
	if err == nil || !strings.Contains(fmt.Sprint(diags), "repo/linked.yaml: a symbolic link that leads outside the repository") {
		t.Fatalf("%v %v", err, diags)
	}
}

// TestGitConfigEnvAllowlist: an Env reference of a config from Git reads
// only allowed names; a local config reads any.
func TestGitConfigEnvAllowlist(t *testing.T) {
	stack := &Stack{Name: "app", Root: "/checkout"}
	ref := ResourceRef{Type: RefEnv, Env: &EnvSelector{Name: "STACKD_API_TOKEN"}}
	env := func(string) (string, bool) { return "value", true }
	c := &Config{}
	if _, err := c.ResolveRef(stack, "envRefs.X", ref, RefSources{LookupEnv: env}); err == nil ||
		!strings.Contains(err.Error(), "--env-ref-allow") {
		t.Fatalf("not allowed: %v", err)
	}
	if v, err := c.ResolveRef(stack, "envRefs.X", ref, RefSources{LookupEnv: env, EnvAllow: []string{"STACKD_*"}}); err != nil || v != "value" {
		t.Fatalf("allowed: %q %v", v, err)
	}
	if v, err := c.ResolveRef(&Stack{Name: "app"}, "envRefs.X", ref, RefSources{LookupEnv: env}); err != nil || v != "value" {
		t.Fatalf("a local config: %q %v", v, err)
	}
}

// TestGitConfigFSReadThroughRoot: an FS reference of a config from Git
// that is a symbolic link leading out is not read.
func TestGitConfigFSReadThroughRoot(t *testing.T) {
	root := gitCheckout(t, map[string]string{"ok": "fine"})
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	c := &Config{}
	s := &Stack{Name: "app", Root: root, Dir: root}
	if v, err := c.ResolveRef(s, "x", ResourceRef{Type: RefFS, Filesystem: &FSSelector{Path: "ok"}}, RefSources{}); err != nil || v != "fine" {
		t.Fatalf("inside: %q %v", v, err)
	}
	if v, err := c.ResolveRef(s, "x", ResourceRef{Type: RefFS, Filesystem: &FSSelector{Path: "link"}}, RefSources{}); err == nil {
		t.Fatalf("a link out was read: %q", v)
	}
}

// TestMisplacedConfigKey: a stack config key written under spec is
// pointed to config.
func TestMisplacedConfigKey(t *testing.T) {
	_, diags, err := Parse("stacks.yaml", []byte("stacks:\n  - name: app\n    stack: dev\n    projectRepo: https://git.example/a.git\n    branch: main\n    aws:region: eu-west-1\n"))
	if err == nil || !strings.Contains(fmt.Sprint(diags), "stacks.yaml:6:5: stacks[0].aws:region: unknown field \"aws:region\" (a stack config value belongs under config: config.aws:region)") {
		t.Fatalf("%v %v", err, diags)
	}
}
