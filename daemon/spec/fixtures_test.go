package spec

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// secretsInFixtures are values the fixtures use as secrets. No diagnostic
// may contain them.
var secretsInFixtures = []string{"SENTINEL-SECRET-VALUE-1234", "s3cret"}

// fixtureConfigs lists the configs under dir: each *.yaml/*.yml file and
// each subdirectory is one config. It fails when there are none, so that
// an emptied fixture directory cannot pass.
func fixtureConfigs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var configs []string
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); e.IsDir() || ext == ".yaml" || ext == ".yml" {
			configs = append(configs, filepath.Join(dir, e.Name()))
		}
	}
	if len(configs) == 0 {
		t.Fatalf("no fixtures in %s", dir)
	}
	return configs
}

func TestLoadGoodFixtures(t *testing.T) {
	for _, path := range fixtureConfigs(t, "../../testdata/config/good") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, diags, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Stacks) == 0 {
				t.Fatal("no stacks loaded")
			}
			assertNoSecrets(t, diags)
		})
	}
}

// want is an expectation written in a bad fixture as
// "# want: LINE:COL PATH"; "*" matches anything.
type want struct {
	file, line, col, path string
}

var wantLine = regexp.MustCompile(`^#\s*want:\s*(\S+):(\S+)\s+(\S+)\s*$`)

func readWants(t *testing.T, config string) []want {
	t.Helper()
	files := []string{config}
	if info, err := os.Stat(config); err == nil && info.IsDir() {
		var err error
		if files, err = configFiles(config); err != nil {
			t.Fatal(err)
		}
	}
	var wants []want
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if m := wantLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
				wants = append(wants, want{f, m[1], m[2], m[3]})
			}
		}
		fh.Close()
	}
	return wants
}

func (w want) matches(d Diagnostic) bool {
	field := func(pattern string, value int) bool {
		return pattern == "*" || pattern == strconv.Itoa(value)
	}
	return !d.Note && d.Pos.File == w.file && field(w.line, d.Pos.Line) && field(w.col, d.Pos.Col) &&
		(w.path == "*" || w.path == d.Path)
}

func TestLoadBadFixtures(t *testing.T) {
	for _, path := range fixtureConfigs(t, "../../testdata/config/bad") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, diags, err := Load(path)
			if err == nil {
				t.Fatalf("loaded without error (%d stacks)", len(cfg.Stacks))
			}
			assertNoSecrets(t, diags)
			errs := diags.Errors()
			for _, w := range readWants(t, path) {
				found := false
				for _, d := range errs {
					found = found || w.matches(d)
				}
				if !found {
					t.Errorf("no error at %s:%s:%s %s; got:\n%s", w.file, w.line, w.col, w.path, list(errs))
				}
			}
			for _, d := range errs {
				if d.Pos.File == "" {
					t.Errorf("error without a file: %s", d)
				}
			}
		})
	}
}

func assertNoSecrets(t *testing.T, diags Diagnostics) {
	t.Helper()
	for _, d := range diags {
		for _, s := range secretsInFixtures {
			if strings.Contains(d.String(), s) {
				t.Errorf("diagnostic leaks a secret value: %s", d)
			}
		}
	}
}

func list(diags Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

// TestShippedConfigs keeps the configs under configs/ valid.
func TestShippedConfigs(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	for _, f := range files {
		if _, diags, err := Load(f); err != nil || len(diags) != 0 {
			t.Errorf("%s: %v\n%s", f, err, list(diags))
		}
	}
}

// TestGoodFixtureContent checks that documented shapes decode to what they
// say, not merely without error.
func TestGoodFixtureContent(t *testing.T) {
	load := func(name string) *Config {
		t.Helper()
		cfg, _, err := Load("../../testdata/config/good/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	stackOutputs := func(cfg *Config) int {
		n := 0
		for _, s := range cfg.Stacks {
			for _, r := range s.Spec.EnvRefs {
				if r.Type == RefStackOutput && r.StackOutput != nil && r.StackOutput.Stack != "" && r.StackOutput.Output != "" {
					n++
				}
			}
		}
		return n
	}
	if cfg := load("pko-argocd-guide-stackoutput-flat.yaml"); stackOutputs(cfg) == 0 {
		t.Error("the guide's flat StackOutput form decoded to nothing")
	}
	if cfg := load("pko-prerequisites.yaml"); stackOutputs(cfg) == 0 {
		t.Error("no StackOutput refs in pko-prerequisites.yaml")
	}
	prereqs := 0
	for _, s := range load("pko-prerequisites.yaml").Stacks {
		for _, p := range s.Spec.Prerequisites {
			if p.Name == "" {
				t.Errorf("%s: prerequisite without a name", s.Name)
			}
			prereqs++
		}
	}
	if prereqs < 2 {
		t.Errorf("pko-prerequisites.yaml: %d prerequisites", prereqs)
	}
	refs := 0
	for _, s := range load("pko-configrefs-spelling.yaml").Stacks {
		refs += len(s.Spec.ConfigRef)
	}
	if refs == 0 {
		t.Error("configRefs spelling decoded to no configRef")
	}
	if cfg := load("pko-structured-config.yaml"); len(cfg.ConfigMaps) == 0 {
		t.Error("no ConfigMap documents in pko-structured-config.yaml")
	}
	if cfg := load("pko-program.yaml"); len(cfg.Programs) == 0 {
		t.Error("no Program in pko-program.yaml")
	}
	for _, s := range load("pko-gitauth.yaml").Stacks {
		if s.Spec.GitAuth == nil {
			t.Errorf("%s: gitAuth missing", s.Name)
		}
	}
	compact := load("compact.yaml")
	if len(compact.Programs) == 0 || len(compact.Stacks) < 2 {
		t.Errorf("compact.yaml: %d stacks, %d programs", len(compact.Stacks), len(compact.Programs))
	}
}

// TestExampleDetectsDrift: the bundled example (make run) checks its
// repository stack for drift, so that the status the README shows, with
// its DRIFT column, is what a newcomer sees.
func TestExampleDetectsDrift(t *testing.T) {
	cfg, diags, err := Load("../../configs/stackd.example.yaml")
	if err != nil || len(diags) != 0 {
		t.Fatalf("the example does not validate: %v\n%s", err, list(diags))
	}
	for _, s := range cfg.Stacks {
		if s.Name != "example" {
			continue
		}
		if dd := s.Spec.DriftDetection; dd == nil || dd.Interval.Duration <= 0 {
			t.Fatalf("the example stack has no drift detection: %+v", dd)
		}
		return
	}
	t.Fatal("the example config has no stack named example")
}
