package spec

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testExpander evaluates generators for tests: list elements as written,
// and for a git generator one fixed parameter set (gitParams); a matrix
// is the product, a merge overlays the first generator's sets.
func testExpander(set *StackSet) ([]Generated, error) {
	var out []Generated
	for i, g := range set.Spec.Generators {
		gen := indexPath(joinPath(set.base, "generators"), i)
		for j, p := range evalGenerator(g) {
			out = append(out, Generated{Params: p, Generator: gen, Origin: fmt.Sprintf("params[%d]", j)})
		}
	}
	return out, nil
}

// gitParams is what testExpander's git generators yield: the directory
// envs/dev, with config.yaml's fields for a files generator.
func gitParams(files bool) map[string]any {
	path := map[string]any{
		"path": "envs/dev", "basename": "dev", "basenameNormalized": "dev",
		"segments": []any{"envs", "dev"},
	}
	p := map[string]any{"path": path}
	if files {
		path["filename"], path["filenameNormalized"] = "config.yaml", "config.yaml"
		p["env"], p["region"] = "dev", "eu-west-1"
		p["account"] = map[string]any{"id": "123456789012", "team": "payments"}
	}
	return p
}

func evalGenerator(g Generator) []map[string]any {
	switch {
	case g.List != nil:
		return g.List.Elements
	case g.Git != nil:
		return []map[string]any{gitParams(len(g.Git.Files) > 0)}
	case g.Matrix != nil:
		var out []map[string]any
		for _, a := range evalGenerator(g.Matrix.Generators[0]) {
			for _, b := range evalGenerator(g.Matrix.Generators[1]) {
				m := maps.Clone(a)
				maps.Copy(m, b)
				out = append(out, m)
			}
		}
		return out
	case g.Merge != nil:
		out := evalGenerator(g.Merge.Generators[0])
		for _, other := range g.Merge.Generators[1:] {
			for _, o := range evalGenerator(other) {
				for _, m := range out {
					if agree(m, o, g.Merge.MergeKeys) {
						maps.Copy(m, o)
					}
				}
			}
		}
		return out
	}
	return nil
}

func agree(a, b map[string]any, keys []string) bool {
	for _, k := range keys {
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			return false
		}
	}
	return true
}

// loadSets writes src to a file of a temporary directory and loads it
// with testExpander.
func loadSets(t *testing.T, src string) (*Config, Diagnostics, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "stacks.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return LoadInputsExpanding([]Input{{Source: dir, Path: file, Shown: "stacks.yaml"}}, testExpander)
}

const envSets = `stacks:
  - name: shared
    stack: org/shared/prod
    projectRepo: https://example.com/org/shared.git
    branch: main
stackSets:
  - name: envs
    generators:
      - list:
          elements:
            - {env: dev, region: eu-west-1, resync: 60}
            - {env: prod, region: us-east-1, resync: 600}
    strategy:
      rollingSync:
        steps:
          - matchLabels: {env: dev}
          - matchExpressions: [{key: env, operator: In, values: [prod]}]
            maxUpdate: 25%
    syncPolicy:
      preserveResourcesOnDeletion: true
    template:
      metadata:
        name: "app-{{.env}}"
        labels: {env: "{{.env}}"}
      spec:
        stack: "org/app/{{.env}}"
        projectRepo: https://example.com/org/app.git
        branch: main
        destroyOnFinalize: true
        resyncFrequencySeconds: "{{.resync}}"
        config:
          aws:region: "{{.region}}"
          "app:{{.env}}": "yes"
          replicas: 2
`

const netSet = `---
apiVersion: stackd.io/v1
kind: StackSet
metadata:
  name: net
  labels: {team: network}
spec:
  generators:
    - git:
        repoURL: https://example.com/org/envs.git
        revision: main
        directories:
          - path: envs/*
          - path: envs/legacy
            exclude: true
  strategy:
    type: RollingSync
    rollingSync:
      steps:
        - matchLabels: {env: dev}
          maxUpdate: 1
  template:
    metadata:
      name: "net-{{.path.basename}}"
      annotations: {link.argocd.argoproj.io/external-link: "https://example.com/{{.path.path}}"}
    spec:
      stack: "org/net/{{index .path.segments 1}}"
      projectRepo: https://example.com/org/net.git
      branch: main
      repoDir: "{{.path.path}}"
`

func TestStackSetsRender(t *testing.T) {
	cfg, _, err := loadSets(t, envSets+netSet)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range cfg.Stacks {
		names = append(names, s.Name+"/"+s.Owner)
	}
	if got, want := strings.Join(names, " "), "shared/ app-dev/StackSet/envs app-prod/StackSet/envs net-dev/StackSet/net"; got != want {
		t.Fatalf("stacks %s, want %s", got, want)
	}
	prod := cfg.Stack("app-prod")
	if prod.Labels["env"] != "prod" || prod.Spec.Stack != "org/app/prod" || prod.Spec.DestroyOnFinalize {
		t.Errorf("app-prod: labels %v, stack %q, destroyOnFinalize %v", prod.Labels, prod.Spec.Stack, prod.Spec.DestroyOnFinalize)
	}
	if prod.Spec.ResyncFrequencySeconds != 600 || prod.Spec.Config["aws:region"] != "us-east-1" ||
		prod.Spec.Config["app:prod"] != "yes" || prod.Spec.Config["replicas"] != int64(2) {
		t.Errorf("app-prod: resync %d, config %v", prod.Spec.ResyncFrequencySeconds, prod.Spec.Config)
	}
	if prod.Pos.Line != 23 || prod.Source == "" || prod.Dir == "" {
		t.Errorf("app-prod at %v, source %q, dir %q", prod.Pos, prod.Source, prod.Dir)
	}
	net := cfg.Stack("net-dev")
	if net.Spec.Stack != "org/net/dev" || net.Spec.RepoDir != "envs/dev" || net.ExternalLink() != "https://example.com/envs/dev" {
		t.Errorf("net-dev: %+v", net)
	}
	if len(cfg.StackSets) != 2 || cfg.StackSets[1].Spec.Labels["team"] != "network" {
		t.Fatalf("sets %+v", cfg.StackSets)
	}
	steps := cfg.StackSets[0].Spec.Strategy.RollingSync.Steps
	if cfg.StackSets[0].Spec.Strategy.Type != RollingSyncStrategy || len(steps) != 2 || steps[1].Limit(8) != 2 {
		t.Errorf("strategy %+v", cfg.StackSets[0].Spec.Strategy)
	}
}

func TestStackSetsNotExpanded(t *testing.T) {
	cfg, _, err := Parse("stacks.yaml", []byte(envSets+netSet))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Stacks) != 1 || len(cfg.StackSets) != 2 {
		t.Fatalf("%d stacks, %d sets", len(cfg.Stacks), len(cfg.StackSets))
	}
}

// TestStackSetErrors: each problem of a set is reported at its place,
// with its path.
func TestStackSetErrors(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"set name", "name: envs", "name: Envs", `stacks.yaml:7:11: stackSets[0].name: invalid name "Envs"`},
		{"generator field", "      - list:", "      - lists:", `stacks.yaml:9:9: stackSets[0].generators[0].lists: unknown field "lists" (did you mean "list"?)`},
		{"no generator", "      - list:", "      - {}\n      - list:", "stacks.yaml:9:9: stackSets[0].generators[0]: a generator sets exactly one of list, git, matrix, merge"},
		{"two generators", "      - list:", "      - git: {repoURL: https://example.com/a.git, files: [{path: a.yaml}]}\n        list:",
			"stacks.yaml:9:9: stackSets[0].generators[0]: a generator sets exactly one of list, git, matrix, merge"},
		{"element not a mapping", "            - {env: dev, region: eu-west-1, resync: 60}", "            - dev",
			"stacks.yaml:11:15: stackSets[0].generators[0].list.elements[0]: expected a mapping, got a string"},
		{"strategy type", "      rollingSync:", "      type: AllAtOnce\n      rollingSync:", "stacks.yaml:14:13: stackSets[0].strategy.type: unknown strategy type (stackd knows RollingSync)"},
		{"no steps", "        steps:\n          - matchLabels: {env: dev}\n          - matchExpressions: [{key: env, operator: In, values: [prod]}]\n            maxUpdate: 25%",
			"        steps: []", "stacks.yaml:14:7: stackSets[0].strategy: a RollingSync strategy needs rollingSync.steps"},
		{"operator", "operator: In", "operator: Is", `stacks.yaml:17:53: stackSets[0].strategy.rollingSync.steps[1].matchExpressions[0].operator: unknown operator "Is" (In, NotIn, Exists or DoesNotExist)`},
		{"In without values", "operator: In, values: [prod]", "operator: In", "stacks.yaml:17:32: stackSets[0].strategy.rollingSync.steps[1].matchExpressions[0].values: operator In needs values"},
		{"Exists with values", "operator: In", "operator: Exists", "stacks.yaml:17:69: stackSets[0].strategy.rollingSync.steps[1].matchExpressions[0].values: operator Exists takes no values"},
		{"label key", "key: env", "key: -env", `stacks.yaml:17:38: stackSets[0].strategy.rollingSync.steps[1].matchExpressions[0].key: invalid label key "-env"`},
		{"matchLabels key", "matchLabels: {env: dev}", "matchLabels: {a/b/c: dev}", `stacks.yaml:16:27: stackSets[0].strategy.rollingSync.steps[0].matchLabels.a/b/c: invalid label key "a/b/c"`},
		{"maxUpdate 0%", "maxUpdate: 25%", "maxUpdate: 0%", "stacks.yaml:18:24: stackSets[0].strategy.rollingSync.steps[1].maxUpdate: a maxUpdate percentage is from 1% to 100%"},
		{"maxUpdate 101%", "maxUpdate: 25%", "maxUpdate: 101%", "stacks.yaml:18:24: stackSets[0].strategy.rollingSync.steps[1].maxUpdate: a maxUpdate percentage is from 1% to 100%"},
		{"maxUpdate 0", "maxUpdate: 25%", "maxUpdate: 0", "stacks.yaml:18:24: stackSets[0].strategy.rollingSync.steps[1].maxUpdate: maxUpdate is at least 1"},
		{"maxUpdate word", "maxUpdate: 25%", "maxUpdate: half", "stacks.yaml:18:24: stackSets[0].strategy.rollingSync.steps[1].maxUpdate: maxUpdate is a count (2) or a percentage of the step's stacks (25%)"},
		{"no template name", `        name: "app-{{.env}}"`, "", "stacks.yaml:24:9: stackSets[0].template.metadata.name: missing name"},
		{"template metadata field", `        labels: {env: "{{.env}}"}`, `        label: {env: "{{.env}}"}`, `stacks.yaml:24:9: stackSets[0].template.metadata.label: unknown field "label" (did you mean "labels"?)`},
		{"template field", "      spec:", "      specs:", `stacks.yaml:25:7: stackSets[0].template.specs: unknown field "specs" (did you mean "spec"?)`},
		{"template syntax", `stack: "org/app/{{.env}}"`, `stack: "org/app/{{.env}"`, `stacks.yaml:26:16: stackSets[0].template.spec.stack: invalid template: bad character U+007D '}'`},
		{"template key syntax", `"app:{{.env}}"`, `"app:{{env}}"`, `stacks.yaml:33:11: stackSets[0].template.spec.config.app:{{env}}: invalid template: function "env" not defined`},
		{"no template", "    template:\n", "    templat:\n", `stacks.yaml:21:5: stackSets[0].templat: unknown field "templat" (did you mean "template"?)`},
		{"syncPolicy field", "preserveResourcesOnDeletion", "preserveResources", `stackSets[0].syncPolicy.preserveResources: unknown field "preserveResources"`},
		{"duplicate set", "stackSets:\n", "stackSets:\n  - name: envs\n    generators: [{list: {elements: []}}]\n    template: {metadata: {name: x}}\n",
			`stacks.yaml:10:11: stackSets[1].name: duplicate StackSet name "envs" (first defined at stacks.yaml:7:11)`},
		{"missing key", `stack: "org/app/{{.env}}"`, `stack: "org/{{.region}}/{{.zone}}"`,
			`stacks.yaml:26:16: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.spec.stack: executing template: map has no entry for key "zone"`},
		{"missing key in a key", `"app:{{.env}}"`, `"app:{{.zone}}"`,
			`stacks.yaml:33:11: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.spec.config.app:{{.zone}}: executing template: map has no entry for key "zone"`},
		{"secret template not quoted", "          replicas: 2", "        secretsRef:\n          pw: {type: Literal, literal: {value: \"s3cret{{s3cret}}\"}}",
			`stacks.yaml:35:48: stackSets[0].template.spec.secretsRef.pw.literal.value: invalid template: (details withheld: the value may be a secret)`},
		{"generated stack invalid", "branch: main\n        destroyOnFinalize", "branch: 'a..{{.env}}'\n        destroyOnFinalize",
			`stacks.yaml:28:17: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.spec.branch: not a valid Git branch or tag name`},
		{"generated unknown field", "destroyOnFinalize: true", "destroyOnFinalise: true",
			`stacks.yaml:29:9: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.spec.destroyOnFinalise: unknown field`},
		{"generated wrong type", `resyncFrequencySeconds: "{{.resync}}"`, `resyncFrequencySeconds: "{{.region}}"`,
			`stacks.yaml:30:33: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.spec.resyncFrequencySeconds: expected an integer, got a string`},
		{"generated name", `name: "app-{{.env}}"`, `name: "App-{{.env}}"`,
			`stacks.yaml:23:15: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.metadata.name: invalid name "App-dev"`},
		{"generated duplicates written", "name: shared", "name: app-dev",
			`stacks.yaml:23:15: stackSets[0] "envs" (stackSets[0].generators[0], params[0]): template.metadata.name: duplicate stack name "app-dev" (first defined at stacks.yaml:2:11)`},
		{"generated duplicates generated", `name: "app-{{.env}}"`, `name: "app"`,
			`stacks.yaml:23:15: stackSets[0] "envs" (stackSets[0].generators[0], params[1]): template.metadata.name: duplicate stack name "app" (first defined at stacks.yaml:23:15)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(envSets, tt.old) {
				t.Fatalf("fixture changed: no %q", tt.old)
			}
			_, diags, err := loadSets(t, strings.Replace(envSets, tt.old, tt.new, 1))
			if err == nil {
				t.Fatal("loaded without error")
			}
			got := list(diags.Errors())
			if !strings.Contains(got, tt.want) {
				t.Fatalf("errors:\n%swant one containing:\n  %s", got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Fatalf("a secret leaked:\n%s", got)
			}
		})
	}
}

// setWith is a set with one generator, gen, written at line 4.
func setWith(gen string) string {
	return `stackSets:
  - name: s
    generators:
` + gen + `
    template:
      metadata: {name: "x-{{.path.basename}}"}
      spec: {stack: x, projectRepo: https://example.com/x.git, branch: main}
`
}

func TestGeneratorErrors(t *testing.T) {
	matrix := func(depth int) string {
		g := "{list: {elements: [{a: 1}]}}"
		for range depth {
			g = fmt.Sprintf("{matrix: {generators: [%s, {list: {elements: [{b: 1}]}}]}}", g)
		}
		return "      - " + g
	}
	tests := []struct {
		name, gen, want string
	}{
		{"no repoURL", "      - git: {directories: [{path: '*'}]}", "stacks.yaml:4:14: stackSets[0].generators[0].git: missing repoURL"},
		{"repoURL", "      - git: {repoURL: 'https://u:s3cret@example.com/x.git', directories: [{path: '*'}]}",
			"stacks.yaml:4:24: stackSets[0].generators[0].git.repoURL: credentials in the URL: put them in gitAuth instead"},
		{"revision", "      - git: {repoURL: 'https://example.com/x.git', revision: 'a..b', directories: [{path: '*'}]}",
			"stacks.yaml:4:63: stackSets[0].generators[0].git.revision: not a valid Git branch, tag or full commit SHA"},
		{"neither directories nor files", "      - git: {repoURL: 'https://example.com/x.git'}",
			"stacks.yaml:4:14: stackSets[0].generators[0].git: a git generator sets exactly one of directories and files"},
		{"both directories and files", "      - git: {repoURL: 'https://example.com/x.git', directories: [{path: a}], files: [{path: a/c.yaml}]}",
			"stacks.yaml:4:14: stackSets[0].generators[0].git: a git generator sets exactly one of directories and files"},
		{"empty glob", "      - git: {repoURL: 'https://example.com/x.git', directories: [{exclude: true}]}",
			"stacks.yaml:4:67: stackSets[0].generators[0].git.directories[0].path: empty glob"},
		{"bad glob", "      - git: {repoURL: 'https://example.com/x.git', files: [{path: 'envs/[a/c.yaml'}]}",
			"stacks.yaml:4:68: stackSets[0].generators[0].git.files[0].path: malformed glob envs/[a/c.yaml"},
		{"glob field", "      - git: {repoURL: 'https://example.com/x.git', files: [{path: 'a.yaml', exclud: true}]}",
			`stacks.yaml:4:78: stackSets[0].generators[0].git.files[0].exclud: unknown field "exclud" (did you mean "exclude"?)`},
		{"gitAuth", "      - git: {repoURL: 'https://example.com/x.git', files: [{path: a.yaml}], gitAuth: {}}",
			"stacks.yaml:4:87: stackSets[0].generators[0].git.gitAuth: gitAuth must set one of sshAuth, accessToken, githubApp, basicAuth"},
		{"gitAuth ref", "      - git: {repoURL: 'https://example.com/x.git', files: [{path: a.yaml}], gitAuth: {accessToken: {type: Secret, secret: {name: t}}}}",
			"stackSets[0].generators[0].git.gitAuth.accessToken.secret.key: missing key"},
		{"matrix of one", "      - matrix: {generators: [{list: {elements: []}}]}",
			"stacks.yaml:4:30: stackSets[0].generators[0].matrix.generators: a matrix combines exactly 2 generators, not 1"},
		{"merge of one", "      - merge: {mergeKeys: [a], generators: [{list: {elements: []}}]}",
			"stacks.yaml:4:45: stackSets[0].generators[0].merge.generators: a merge combines at least 2 generators, not 1"},
		{"merge without keys", "      - merge: {generators: [{list: {elements: []}}, {list: {elements: []}}]}",
			"stacks.yaml:4:16: stackSets[0].generators[0].merge.mergeKeys: a merge needs mergeKeys"},
		{"too deep", matrix(3),
			"stacks.yaml:4:64: stackSets[0].generators[0].matrix.generators[0].matrix.generators[0].matrix: matrix and merge generators nest at most 2 levels deep"},
		{"no generators", "      []", "stacks.yaml:4:7: stackSets[0].generators: a StackSet needs at least one generator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, err := Parse("stacks.yaml", []byte(setWith(tt.gen)))
			if err == nil {
				t.Fatal("parsed without error")
			}
			got := list(diags.Errors())
			if !strings.Contains(got, tt.want) {
				t.Fatalf("errors:\n%swant one containing:\n  %s", got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Fatalf("a secret leaked:\n%s", got)
			}
		})
	}
	if _, _, err := Parse("stacks.yaml", []byte(setWith(matrix(2)))); err != nil {
		t.Errorf("a matrix of a matrix: %v", err)
	}
}

func TestStackSetManifestErrors(t *testing.T) {
	tests := []struct{ old, new, want string }{
		{"stackd.io/v1", "stackd.io/v2", "stacks.yaml:2:13: apiVersion: unsupported version of stackd.io (stackd reads v1)"},
		{"kind: StackSet", "kind: StackSets", "stacks.yaml:3:7: kind: unknown stackd.io kind (stackd reads StackSet)"},
		{"  name: net", "  name: net_1", `stacks.yaml:5:9: metadata.name: invalid name "net_1"`},
		{"  strategy:", "  stratgy:", `stacks.yaml:16:3: spec.stratgy: unknown field "stratgy" (did you mean "strategy"?)`},
		{"maxUpdate: 1", "maxUpdate: 1.5", "stacks.yaml:21:22: spec.strategy.rollingSync.steps[0].maxUpdate: maxUpdate is a count"},
		{"repoDir: \"{{.path.path}}\"", "repoDir: \"{{.path.dir}}\"",
			`stacks.yaml:30:16: StackSet "net" (spec.generators[0], params[0]): template.spec.repoDir: executing template: map has no entry for key "dir"`},
	}
	for _, tt := range tests {
		if !strings.Contains(netSet, tt.old) {
			t.Fatalf("fixture changed: no %q", tt.old)
		}
		_, diags, err := loadSets(t, strings.Replace(netSet, tt.old, tt.new, 1))
		if got := list(diags.Errors()); err == nil || !strings.Contains(got, tt.want) {
			t.Errorf("%s: errors:\n%swant one containing:\n  %s", tt.new, got, tt.want)
		}
	}
}

// TestExpanderError: a generator that fails is one error at the set's
// generators, and no stack is generated.
func TestExpanderError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stacks.yaml")
	if err := os.WriteFile(file, []byte(envSets), 0o600); err != nil {
		t.Fatal(err)
	}
	fail := func(*StackSet) ([]Generated, error) { return nil, errors.New("git: repository unreachable") }
	_, diags, err := LoadInputsExpanding([]Input{{Source: dir, Path: file, Shown: "stacks.yaml"}}, fail)
	want := `stacks.yaml:9:7: stackSets[0].generators: generating the stacks of StackSet "envs": git: repository unreachable`
	if got := list(diags.Errors()); err == nil || got != "  "+want+"\n" {
		t.Fatalf("errors:\n%swant\n  %s", got, want)
	}
	many := func(*StackSet) ([]Generated, error) { return make([]Generated, MaxGeneratedStacks+1), nil }
	_, diags, _ = LoadInputsExpanding([]Input{{Source: dir, Path: file, Shown: "stacks.yaml"}}, many)
	if got := list(diags.Errors()); !strings.Contains(got, "more than 20000 (the limit of one StackSet)") {
		t.Fatalf("errors:\n%s", got)
	}
}

// TestFingerprintLabelsOwnerStrategy: labels, owners and strategies are
// part of what a config means.
func TestFingerprintLabelsOwnerStrategy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stacks.yaml")
	print := func(src string) string {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := LoadInputsExpanding([]Input{{Source: "s", Path: file}}, testExpander)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Fingerprint()
	}
	base := print(envSets)
	for _, change := range []struct{ old, new string }{
		{`labels: {env: "{{.env}}"}`, `labels: {env: "{{.env}}", tier: web}`},
		{"maxUpdate: 25%", "maxUpdate: 50%"},
		{"name: envs", "name: envz"}, // the owner
	} {
		if print(strings.Replace(envSets, change.old, change.new, 1)) == base {
			t.Errorf("%s kept the fingerprint", change.new)
		}
	}
	if print(strings.Replace(envSets, "    syncPolicy:", "    # a comment\n    syncPolicy:", 1)) != base {
		t.Error("a comment changed the fingerprint")
	}
}

// TestRenderTypes: a whole-action value takes the type its result reads
// as; other values stay strings; anchors and aliases of the template are
// rendered where they are used.
func TestRenderTypes(t *testing.T) {
	src := `stackSets:
  - name: t
    generators:
      - list:
          elements:
            - {env: dev, refresh: true, n: 30, tag: "007"}
    template:
      metadata: {name: "t-{{.env}}"}
      spec:
        stack: "{{.env}}"
        projectRepo: https://example.com/x.git
        branch: &b "{{.refresh}}"
        refresh: "{{.refresh}}"
        resyncFrequencySeconds: " {{.n}} "
        config:
          tag: "{{.tag}}"
          n: "{{.n}}"
          padded: "n={{.n}}"
          again: *b
`
	cfg, _, err := loadSets(t, src)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Stack("t-dev")
	if s.Spec.Branch != "true" || !s.Spec.Refresh || s.Spec.ResyncFrequencySeconds != 30 {
		t.Errorf("branch %q, refresh %v, resync %d", s.Spec.Branch, s.Spec.Refresh, s.Spec.ResyncFrequencySeconds)
	}
	want := map[string]any{"tag": "007", "n": int64(30), "padded": "n=30", "again": true}
	for k, v := range want {
		if s.Spec.Config[k] != v {
			t.Errorf("config.%s = %#v, want %#v", k, s.Spec.Config[k], v)
		}
	}
}
