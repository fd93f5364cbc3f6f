package spec

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// gitopsExample is the manifests repository of the trunk-based workflow
// shipped under configs/gitops.
const gitopsExample = "../../configs/gitops/environments"

// exampleStack is what the example promises about one of its stacks.
type exampleStack struct {
	wave    int
	preview bool
	branch  string
	commit  string
	destroy bool
}

var gitopsStacks = map[string]map[string]exampleStack{
	"preview": {
		"preview-app-add-cache": {wave: 10, preview: true, branch: "feature/add-cache", destroy: true},
	},
	"staging": {
		"staging-network": {wave: 1, branch: "main"},
		"staging-app":     {wave: 2, branch: "main"},
	},
	"production": {
		"production-network": {wave: 1, commit: "4f2c9e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4"},
		"production-app":     {wave: 2, branch: "release"},
	},
}

// TestExampleGitopsEnvironments loads each environment directory of the
// example, as a daemon with one config source per environment would.
func TestExampleGitopsEnvironments(t *testing.T) {
	for env, want := range gitopsStacks {
		t.Run(env, func(t *testing.T) {
			cfg := loadExample(t, filepath.Join(gitopsExample, env))
			checkExampleStacks(t, cfg, want)
		})
	}
}

// TestExampleGitopsAllEnvironments loads the environments directory as a
// whole, as one daemon for every environment would: the stack names of
// the environments must not collide.
func TestExampleGitopsAllEnvironments(t *testing.T) {
	all := map[string]exampleStack{}
	for _, stacks := range gitopsStacks {
		for name, s := range stacks {
			all[name] = s
		}
	}
	checkExampleStacks(t, loadExample(t, gitopsExample), all)
}

func loadExample(t *testing.T, dir string) *Config {
	t.Helper()
	cfg, diags, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v\n%v", dir, err, diags)
	}
	for _, d := range diags {
		t.Errorf("Load(%s): unexpected note: %v", dir, d)
	}
	return cfg
}

func checkExampleStacks(t *testing.T, cfg *Config, want map[string]exampleStack) {
	t.Helper()
	var names []string
	for _, s := range cfg.Stacks {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	var wantNames []string
	for name := range want {
		wantNames = append(wantNames, name)
	}
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Fatalf("stacks %v, want %v", names, wantNames)
	}
	for _, s := range cfg.Stacks {
		w := want[s.Name]
		if s.SyncWave != w.wave {
			t.Errorf("%s: sync wave %d, want %d", s.Name, s.SyncWave, w.wave)
		}
		if s.Spec.Preview != w.preview {
			t.Errorf("%s: preview %v, want %v", s.Name, s.Spec.Preview, w.preview)
		}
		if s.Spec.Branch != w.branch || s.Spec.Commit != w.commit {
			t.Errorf("%s: branch %q commit %q, want branch %q commit %q",
				s.Name, s.Spec.Branch, s.Spec.Commit, w.branch, w.commit)
		}
		if s.Spec.DestroyOnFinalize != w.destroy {
			t.Errorf("%s: destroyOnFinalize %v, want %v", s.Name, s.Spec.DestroyOnFinalize, w.destroy)
		}
		if s.Spec.ProjectRepo != "https://github.com/example-org/infra.git" {
			t.Errorf("%s: projectRepo %q", s.Name, s.Spec.ProjectRepo)
		}
		if s.Annotations[AnnotationSyncWave] == "" {
			t.Errorf("%s: no %s annotation", s.Name, AnnotationSyncWave)
		}
		if s.ExternalLink() == "" {
			t.Errorf("%s: no %s annotation", s.Name, AnnotationExternalLink)
		}
	}
}

// TestExampleGitopsDocumentedSources parses every Git config source the GitOps
// documentation and example show, placeholders aside.
func TestExampleGitopsDocumentedSources(t *testing.T) {
	files := []string{"../../docs/gitops.md", "../../docs/configuration.md", "../../docs/migrating-from-pko.md",
		"../../README.md", "../../configs/gitops/README.md"}
	value := regexp.MustCompile("git\\+[^\\s'\"`)]+")
	found := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range value.FindAllString(string(data), -1) {
			if strings.Contains(v, "<") {
				continue // a placeholder such as git+<URL>
			}
			found++
			src, err := ParseSource(v)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if src.Git == nil || src.Git.String() != v {
				t.Errorf("%s: %s reads back as %v", name, v, src)
			}
		}
	}
	t.Logf("%d Git config sources parsed", found)
	if found == 0 {
		t.Fatal("no Git config source found in the documentation")
	}
}
