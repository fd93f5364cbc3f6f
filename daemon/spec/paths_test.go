package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		glob, file string
		want       bool
	}{
		{"infra/**", "infra/Pulumi.yaml", true},
		{"infra/**", "infra/net/main.ts", true},
		{"infra/**", "infra", true},
		{"infra/**", "infrastructure/x", false},
		{"infra/*.yaml", "infra/Pulumi.yaml", true},
		{"infra/*.yaml", "infra/net/Pulumi.yaml", false},
		{"**/*.ts", "index.ts", true},
		{"**/*.ts", "a/b/c.ts", true},
		{"**/*.ts", "a/b/c.js", false},
		{"shared/**/config.json", "shared/config.json", true},
		{"shared/**/config.json", "shared/x/y/config.json", true},
		{"shared/**/config.json", "shared/x/y/other.json", false},
		{"README.md", "README.md", true},
		{"README.md", "docs/README.md", false},
		{"**", "anything/at/all", true},
	} {
		if got := MatchPath(tc.glob, tc.file); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %t, want %t", tc.glob, tc.file, got, tc.want)
		}
	}
}

func TestPathFilter(t *testing.T) {
	for _, tc := range []struct {
		spec    StackSpec
		want    []string
		wantAll bool
	}{
		{StackSpec{}, nil, true},
		{StackSpec{RepoDir: "."}, nil, true},
		{StackSpec{RepoDir: "/"}, nil, true},
		{StackSpec{RepoDir: "infra/app"}, []string{"infra/app/**"}, false},
		{StackSpec{RepoDir: "/infra/app/"}, []string{"infra/app/**"}, false},
		{StackSpec{RepoDir: "infra/app", Paths: []string{"infra/app/**", "shared/**"}}, []string{"infra/app/**", "shared/**"}, false},
	} {
		got, all := tc.spec.PathFilter()
		if !slices.Equal(got, tc.want) || all != tc.wantAll {
			t.Errorf("PathFilter of %+v = %q, %t; want %q, %t", tc.spec, got, all, tc.want, tc.wantAll)
		}
	}
}

// TestRepoDirFromRoot: a repoDir with a leading slash, as in PKO's own
// examples, names a directory of the repository, with a note saying so.
func TestRepoDirFromRoot(t *testing.T) {
	cfg, diags := mustParse(t, minimalStack+"  repoDir: /infra/app\n")
	if got := cfg.Stack("app").Spec.RepoPath(); got != "infra/app" {
		t.Errorf("RepoPath = %q, want infra/app", got)
	}
	notes := diags.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0].String(), "test.yaml:10:12: spec.repoDir: note: /infra/app is taken relative to the repository root (infra/app), as PKO does") {
		t.Errorf("notes = %v", notes)
	}
}

func TestHashPaths(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(globs ...string) string {
		t.Helper()
		h, err := HashPaths(root, globs)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write("infra/app/Pulumi.yaml", "name: app")
	write("README.md", "v1")
	write(".git/HEAD", "ref: refs/heads/main")
	app := hash("infra/app/**")
	if app == "" || hash("docs/**") != "" {
		t.Fatalf("digests %q and %q: want one of infra/app and none of docs", app, hash("docs/**"))
	}
	write("README.md", "v2")
	write(".git/HEAD", "ref: refs/heads/other")
	if got := hash("infra/app/**"); got != app {
		t.Errorf("a change outside the paths changed their digest")
	}
	write("infra/app/index.ts", "new file")
	if got := hash("infra/app/**"); got == app {
		t.Errorf("a new file inside the paths left their digest as it was")
	}
}

// TestFullUpdateTemplate: an updateTemplate with every field of PKO's
// Update object loads; what has no standalone meaning is a note saying
// why, never "unknown field".
func TestFullUpdateTemplate(t *testing.T) {
	cfg, diags := mustParse(t, minimalStack+`  updateTemplate:
    apiVersion: auto.pulumi.com/v1alpha1
    kind: Update
    metadata: {labels: {team: infra}}
    spec:
      workspaceName: app
      stackName: dev
      type: up
      ttlAfterCompleted: 1h
      parallel: 4
      message: from stackd
      expectNoChanges: false
      replace: ["urn:pulumi:dev::app::aws:s3/bucket:Bucket::b"]
      target: ["urn:pulumi:dev::app::aws:s3/bucket:Bucket::b"]
      targetDependents: true
      refresh: true
      continueOnError: true
      remove: false
      runProgram: true
    status: {message: done}
`)
	if u := cfg.Stack("app").Spec.UpdateTemplate.Spec; u.Parallel != 4 || u.Message != "from stackd" || !u.ContinueOnError {
		t.Fatalf("update spec = %+v", u)
	}
	var notes []string
	for _, d := range diags.Notes() {
		notes = append(notes, d.String())
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{
		"spec.updateTemplate.apiVersion: note: ignored: Kubernetes-only field",
		"spec.updateTemplate.status: note: ignored: Kubernetes-only field",
		"spec.updateTemplate.spec.workspaceName: note: ignored: stackd runs each operation in a sandboxed process",
		"spec.updateTemplate.spec.stackName: note: ignored: the stack's own spec.stack",
		"spec.updateTemplate.spec.type: note: ignored: stackd picks each operation's type",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
}
