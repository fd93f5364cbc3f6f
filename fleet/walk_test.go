package fleet

import (
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/spec"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"envs/*", "envs/dev", true},
		{"envs/*", "envs", false},
		{"envs/*", "envs/dev/sub", false},
		{"envs/d?v", "envs/dev", true},
		{"envs/[dp]*", "envs/prod", true},
		{"envs/[dp]*", "envs/qa", false},
		{"**", "a", true},
		{"**", "a/b/c", true},
		{"**/overlays/*", "overlays/x", true},
		{"**/overlays/*", "a/b/overlays/x", true},
		{"**/overlays/*", "a/b/overlays", false},
		{"apps/**/overlays/*", "apps/overlays/x", true},
		{"apps/**/overlays/*", "apps/a/b/overlays/x", true},
		{"apps/**/overlays/*", "other/a/overlays/x", false},
		{"a/**", "a", true},
		{"a/**", "a/b/c", true},
		{"a/**/b/**/c", "a/x/b/y/z/c", true},
		{"a/**/b/**/c", "a/x/c", false},
		{"*/config.yaml", "dev/config.yaml", true},
		{"*", "a/b", false},
		{"a*b", "a/b", false},
	} {
		globs, err := compileGlobs([]spec.GitPathGlob{{Path: tc.pat}})
		if err != nil {
			t.Fatalf("%q: %v", tc.pat, err)
		}
		if got := selected(globs, tc.name); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.pat, tc.name, got, tc.want)
		}
	}
}

func TestGlobExcludes(t *testing.T) {
	globs, err := compileGlobs([]spec.GitPathGlob{{Path: "envs/*"}, {Path: "envs/tmp-*", Exclude: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"envs/dev": true, "envs/tmp-1": false, "other": false} {
		if got := selected(globs, name); got != want {
			t.Errorf("%q = %v, want %v", name, got, want)
		}
	}
	// Only excludes select nothing.
	globs, _ = compileGlobs([]spec.GitPathGlob{{Path: "x", Exclude: true}})
	if selected(globs, "y") {
		t.Error("an exclude-only generator selected y")
	}
}

func TestGlobErrors(t *testing.T) {
	for _, p := range []string{"", "/", "envs/[", "a/[]/b"} {
		if _, err := compileGlobs([]spec.GitPathGlob{{Path: p}}); err == nil {
			t.Errorf("%q: no error", p)
		}
	}
}

// A pattern of many "**" stays fast on a deep path.
func TestGlobNotExponential(t *testing.T) {
	pat := strings.Repeat("**/a/", 20) + "b"
	name := strings.Repeat("a/", 60) + "c"
	globs, err := compileGlobs([]spec.GitPathGlob{{Path: pat}})
	if err != nil {
		t.Fatal(err)
	}
	if selected(globs, name) {
		t.Error("matched")
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"dev":           "dev",
		"Prod_EU":       "prod-eu",
		"my.app":        "my-app",
		"a b/c":         "a-b-c",
		"Ünïcode":       "-n-code",
		"already-ok-42": "already-ok-42",
		"":              "",
	} {
		if got := normalize(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathParams(t *testing.T) {
	p := pathParams("a/b/C.d")
	if p["basename"] != "C.d" || p["basenameNormalized"] != "c-d" || len(p["segments"].([]any)) != 3 {
		t.Errorf("pathParams = %#v", p)
	}
	root := pathParams(".")
	if root["path"] != "" || len(root["segments"].([]any)) != 0 {
		t.Errorf("root pathParams = %#v", root)
	}
}

func TestMayHold(t *testing.T) {
	for _, tc := range []struct {
		pat, dir string
		want     bool
	}{
		{"envs/*", "envs", true},
		{"envs/*", "envs/dev", false},
		{"envs/*", "apps", false},
		{"envs/*/config.yaml", "envs/dev", true},
		{"envs/*/config.yaml", "envs/dev/sub", false},
		{"**/overlays/*", "a/b/c", true},
		{"apps/**", "apps/x/y", true},
		{"apps/**", "other", false},
		{"*", "a", false},
	} {
		globs, err := compileGlobs([]spec.GitPathGlob{{Path: tc.pat}})
		if err != nil {
			t.Fatal(err)
		}
		if got := mayHold(globs, tc.dir); got != tc.want {
			t.Errorf("mayHold(%q, %q) = %v, want %v", tc.pat, tc.dir, got, tc.want)
		}
	}
}
