package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mustParse parses a config that must be valid.
func mustParse(t *testing.T, src string) (*Config, Diagnostics) {
	t.Helper()
	cfg, diags, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, diags
}

const minimalStack = `
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: app
spec:
  stack: org/app/dev
  projectRepo: https://example.com/org/app.git
  branch: main
`

func TestParseManifest(t *testing.T) {
	cfg, diags := mustParse(t, minimalStack)
	if len(diags) != 0 {
		t.Fatalf("unexpected diagnostics:\n%s", list(diags))
	}
	s := cfg.Stack("app")
	if s == nil {
		t.Fatal("stack app missing")
	}
	if s.Spec.Stack != "org/app/dev" || s.Spec.Branch != "main" || s.Pos.Line != 5 {
		t.Fatalf("got %+v at %v", s.Spec, s.Pos)
	}
	if !filepath.IsAbs(s.Dir) {
		t.Fatalf("Dir %q is not absolute", s.Dir)
	}
}

func TestParseStructuredConfig(t *testing.T) {
	cfg, _ := mustParse(t, minimalStack+`
  config:
    aws:region: us-west-2
    count: 3
    ratio: 0.5
    enabled: true
    tags: {team: infra, cost: [1, 2]}
    nothing: null
  configRefs:
    fromMap: {name: settings, key: data.json, json: true}
`)
	got, err := json.Marshal(cfg.Stack("app").Spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"aws:region":"us-west-2","count":3,"enabled":true,"nothing":null,"ratio":0.5,"tags":{"cost":[1,2],"team":"infra"}}`
	if string(got) != want {
		t.Fatalf("config = %s, want %s", got, want)
	}
	ref := cfg.Stack("app").Spec.ConfigRef["fromMap"]
	if ref.Name != "settings" || ref.Key != "data.json" || !ref.JSON {
		t.Fatalf("configRefs = %+v", ref)
	}
}

func TestParsePrerequisiteShapes(t *testing.T) {
	cfg, _ := mustParse(t, `
stacks:
  - name: net
    stack: net
    projectRepo: https://example.com/net.git
    branch: main
  - name: db
    stack: db
    projectRepo: https://example.com/db.git
    branch: main
  - name: app
    stack: app
    projectRepo: https://example.com/app.git
    branch: main
    prerequisites:
      - name: net
        requirement:
          succeededWithinDuration: 1h
      - type: Stack
        requirement: db
        succeededWithinDuration: 30m
    envRefs:
      DB_HOST:
        type: StackOutput
        stackOutput: {stack: db, output: host}
`)
	p := cfg.Stack("app").Spec.Prerequisites
	if len(p) != 2 || p[0].Name != "net" || p[0].Requirement.SucceededWithinDuration.Duration != time.Hour ||
		p[1].Name != "db" || p[1].Requirement.SucceededWithinDuration.Duration != 30*time.Minute {
		t.Fatalf("prerequisites = %+v", p)
	}
	if deps := cfg.Stack("app").Dependencies(); strings.Join(deps, ",") != "db,net" {
		t.Fatalf("dependencies = %v", deps)
	}
}

func TestParseNotesKubernetesOnly(t *testing.T) {
	_, diags := mustParse(t, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: pulumi}
---
apiVersion: pulumi.com/v1alpha1
kind: Stack
metadata:
  name: app
  namespace: infra
spec:
  serviceAccountName: pulumi
  workspaceTemplate: {spec: {image: pulumi/pulumi:latest}}
  stack: dev
  projectRepo: git@github.com:org/app.git
  commit: 0123456789abcdef0123456789abcdef01234567
`)
	want := []string{
		"test.yaml:2:1: kind: note: skipped: v1 ServiceAccount \"pulumi\" is not a stackd kind",
		"test.yaml:10:3: metadata.namespace: note: ignored: Kubernetes-only field",
		"test.yaml:12:3: spec.serviceAccountName: note: ignored: Kubernetes-only field",
		"test.yaml:13:3: spec.workspaceTemplate: note: ignored: Kubernetes-only field",
	}
	if got := strings.TrimSpace(list(diags)); got != strings.TrimSpace("  "+strings.Join(want, "\n  ")) {
		t.Fatalf("notes:\n%s\nwant:\n  %s", got, strings.Join(want, "\n  "))
	}
}

func TestParseSecretsAndConfigMaps(t *testing.T) {
	cfg, _ := mustParse(t, minimalStack+`---
apiVersion: v1
kind: Secret
metadata: {name: creds}
data:
  token: aHVudGVyMg==
stringData:
  user: admin
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data:
  region: eu-west-1
`)
	if got := cfg.Secrets["creds"]; got["token"] != "hunter2" || got["user"] != "admin" {
		t.Fatalf("secret data = %v", got)
	}
	if got := cfg.ConfigMaps["settings"]["region"]; got != "eu-west-1" {
		t.Fatalf("configmap region = %q", got)
	}
}

func TestParseAnnotations(t *testing.T) {
	cfg, _ := mustParse(t, `
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: app
  annotations:
    argocd.argoproj.io/sync-wave: "-2"
    link.argocd.argoproj.io/external-link: https://app.pulumi.com/org/app/dev
    pulumi.com/reconciliation-request: "2024-01-01"
spec:
  stack: dev
  projectRepo: https://example.com/app.git
  branch: main
`)
	s := cfg.Stack("app")
	if s.SyncWave != -2 || s.ExternalLink() != "https://app.pulumi.com/org/app/dev" || s.ReconcileRequest() != "2024-01-01" {
		t.Fatalf("wave %d, link %q, request %q", s.SyncWave, s.ExternalLink(), s.ReconcileRequest())
	}
}

// TestParseErrors covers problems that fixtures cannot express well:
// binary data, precise messages, and values that must never be echoed.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "test.yaml: holds no YAML documents"},
		{"only separators", "---\n---\n", "test.yaml: holds no YAML documents"},
		{"binary", "stacks:\x00\x01\x02", "test.yaml: not a YAML text file (binary data at byte 7)"},
		{"invalid utf8", "stacks: [\xff\xfe]", "test.yaml: not a YAML text file (binary data at byte 9)"},
		{"tab indent", "stacks:\n\t- name: a\n", "test.yaml:2:1: yaml: syntax error: tab character in indentation (YAML indents with spaces only)"},
		{"syntax", "stacks: [a, b\n", "test.yaml:1: yaml: syntax error: did not find expected ',' or ']'"},
		{"scalar document", "hello", "test.yaml:1:1: expected a mapping (a manifest or a stacks: list), got a string"},
		{"unknown shape", "foo: bar", "test.yaml:1:1: not a stackd document: expected a manifest (apiVersion, kind) or a stacks:/programs:/changeWindows:/stackSets: list"},
		{"duplicate key", minimalStack + "  branch: dev\n", "test.yaml:10:3: spec.branch: duplicate key"},
		{"typo", strings.Replace(minimalStack, "branch:", "brnch:", 1), `test.yaml:9:3: spec.brnch: unknown field "brnch" (did you mean "branch"?)`},
		{"both configRef spellings", minimalStack + "  configRef: {}\n  configRefs: {}\n", "test.yaml:11:3: spec.configRefs: set either configRef or configRefs, not both"},
		{"bool as string", strings.Replace(minimalStack, "branch: main", "branch: true", 1), "test.yaml:9:11: spec.branch: expected a string, got a boolean (quote it if it is meant as text)"},
		{"negative", minimalStack + "  resyncFrequencySeconds: -1\n", "test.yaml:10:27: spec.resyncFrequencySeconds: must not be negative"},
		{"v2", strings.Replace(minimalStack, "pulumi.com/v1", "pulumi.com/v2", 1), "test.yaml:2:13: apiVersion: unsupported version of pulumi.com (stackd reads v1 and v1alpha1)"},
		{"unknown kind", strings.Replace(minimalStack, "kind: Stack", "kind: Stak", 1), "test.yaml:3:7: kind: unknown pulumi.com kind (stackd reads Stack and Program)"},
		{"bad base64", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: YQ==, k: '!!!'}\n", `test.yaml:4:20: Secret "s".data.k: not valid base64`},
		{"duplicate Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", `test.yaml:7:18: Secret "s".metadata.name: duplicate Secret name "s"`},
		{"merge key", "stacks:\n  - <<: {name: a}\n", "test.yaml:2:5: stacks[0]: merge keys (<<) are not supported"},
		{"alias bomb", aliasBomb(), "document expands to more than"},
		{"url credentials", strings.Replace(minimalStack, "https://example.com", "https://user:s3cret@example.com", 1), "test.yaml:8:16: spec.projectRepo: credentials in the URL: put them in gitAuth instead"},
		{"secret literal not echoed", minimalStack + "  secretsRef:\n    pw: {type: Literal, literal: {value: {s3cret: 1}}}\n",
			"test.yaml:11:42: spec.secretsRef.pw.literal.value: expected a string, got a mapping"},
		{"StackOutput in gitAuth", minimalStack + "  gitAuth:\n    accessToken: {type: StackOutput, stackOutput: {stack: a, output: b}}\n",
			"spec.gitAuth.accessToken.type: StackOutput cannot be used here"},
		{"env ref name", minimalStack + "  envRefs:\n    1BAD: {type: Literal, literal: {value: x}}\n", "test.yaml:11:5: spec.envRefs.1BAD: not a valid environment variable name"},
		{"repoDir escapes", minimalStack + "  repoDir: ../other\n", "test.yaml:10:12: spec.repoDir: repoDir must be a path inside the repository"},
		{"repoDir escapes from the root", minimalStack + "  repoDir: /infra/../../other\n", "test.yaml:10:12: spec.repoDir: repoDir must be a path inside the repository"},
		{"paths absolute", minimalStack + "  paths: [/infra/**]\n", "test.yaml:10:11: spec.paths[0]: a glob is relative to the repository root: no leading /"},
		{"paths escape", minimalStack + "  paths: [infra/../../x]\n", "spec.paths[0]: a glob cannot leave the repository (..)"},
		{"approval op", minimalStack + "  approval: {when: [delete, destroy]}\n", "test.yaml:10:29: spec.approval.when[1]: unknown operation \"destroy\" (one of create, update, delete, replace)"},
		{"approval field", minimalStack + "  approval: {requird: true}\n", "test.yaml:10:14: spec.approval.requird: unknown field"},
		{"approval both", minimalStack + "  approval: {required: true, maxChanges: 3}\n", "spec.approval.required: required: true needs approval of every change"},
		{"approval maxAge", minimalStack + "  approval: {required: true, maxAge: soon}\n", "spec.approval.maxAge"},
		{"reviewStacks field", minimalStack + "  reviewStacks: {enabled: true, tll: 1h}\n", `test.yaml:10:33: spec.reviewStacks.tll: unknown field "tll" (did you mean "ttl"?)`},
		{"reviewStacks ttl", minimalStack + "  reviewStacks: {enabled: true, ttl: 3 days}\n", "test.yaml:10:38: spec.reviewStacks.ttl: invalid duration"},
		{"reviewStacks max", minimalStack + "  reviewStacks: {enabled: true, max: -2}\n", "test.yaml:10:38: spec.reviewStacks.max: must not be negative"},
		{"reviewStacks preview", minimalStack + "  preview: true\n  reviewStacks: {enabled: true}\n", "test.yaml:11:27: spec.reviewStacks.enabled: a stack with preview: true changes nothing"},
		{"reviewStacks placeholder", minimalStack + "  reviewStacks:\n    config: {name: 'app-${prNumbr}'}\n",
			"test.yaml:11:20: spec.reviewStacks.config.name: unknown placeholder ${prNumbr}: the placeholders are ${prNumber} and ${reviewStack}"},
		{"reviewStacks placeholder nested", minimalStack + "  reviewStacks:\n    config:\n      tags: [a, 'b-${pr}']\n",
			"test.yaml:12:17: spec.reviewStacks.config.tags[1]: unknown placeholder ${pr}"},
		{"reviewStacks placeholder unclosed", minimalStack + "  reviewStacks:\n    config: {name: 'app-${reviewStack'}\n",
			`test.yaml:11:20: spec.reviewStacks.config.name: a placeholder "${" is not closed by "}"`},
		{"reviewStacks secret made plain", minimalStack + "  secretsRef:\n    pw: {type: Literal, literal: {value: s3cret}}\n  reviewStacks:\n    config: {pw: plain}\n",
			"test.yaml:13:14: spec.reviewStacks.config.pw: the template's secretsRef.pw is a secret, which a plain value cannot override: override it under reviewStacks.secretsRef"},
		{"reviewStacks secret maybe made plain", minimalStack + "  secretsRef:\n    app:pw: {type: Literal, literal: {value: s3cret}}\n  reviewStacks:\n    config: {pw: plain}\n",
			"test.yaml:13:14: spec.reviewStacks.config.pw: may be the same key as the template's secret secretsRef.app:pw (a key without a namespace is the project's)"},
		{"reviewStacks key twice", minimalStack + "  reviewStacks:\n    config: {pw: plain}\n    secretsRef: {pw: {type: Literal, literal: {value: s3cret}}}\n",
			"test.yaml:11:14: spec.reviewStacks.config.pw: set the key in reviewStacks.config or in reviewStacks.secretsRef, not both"},
		{"reviewStacks secretsRef", minimalStack + "  reviewStacks:\n    secretsRef: {pw: {type: Secret, secret: {name: db}}}\n",
			"spec.reviewStacks.secretsRef.pw.secret.key: missing key"},
		{"reviewStacks envRefs name", minimalStack + "  reviewStacks:\n    envRefs: {'BAD-NAME': {type: Literal, literal: {value: x}}}\n",
			"test.yaml:11:15: spec.reviewStacks.envRefs.BAD-NAME: not a valid environment variable name"},
		{"reviewStacks envRefs ref", minimalStack + "  reviewStacks:\n    envRefs: {TOKEN: {type: Secret, secret: {name: db}}}\n",
			"spec.reviewStacks.envRefs.TOKEN.secret.key: missing key"},
		{"reviewStacks secretsRef field", minimalStack + "  reviewStacks:\n    secretRef: {}\n",
			`spec.reviewStacks.secretRef: unknown field "secretRef" (did you mean "secretsRef"?)`},
		{"paths malformed", minimalStack + "  paths: ['infra/[a']\n", "spec.paths[0]: malformed glob infra/[a"},
		{"bad branch", strings.Replace(minimalStack, "branch: main", "branch: 'a..b'", 1), "test.yaml:9:11: spec.branch: not a valid Git branch or tag name"},
		{"sync wave", strings.Replace(minimalStack, "  name: app", "  name: app\n  annotations: {argocd.argoproj.io/sync-wave: first}", 1),
			"test.yaml:6:47: metadata.annotations.argocd.argoproj.io/sync-wave: sync wave must be an integer"},
		{"gitAuth empty", minimalStack + "  gitAuth: {}\n", "test.yaml:10:12: spec.gitAuth: gitAuth must set one of sshAuth, accessToken, githubApp, basicAuth"},
		{"selector mismatch", minimalStack + "  envRefs:\n    A: {type: Env, env: {name: B}, literal: {value: x}}\n", "spec.envRefs.A.literal: selector does not match type Env"},
		{"secret key path", minimalStack + "  envRefs:\n    A: {type: Secret, secret: {name: s, key: ../x}}\n", `spec.envRefs.A.secret.key: invalid key "../x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, err := Parse("test.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("parsed without error")
			}
			got := list(diags.Errors())
			if !strings.Contains(got, tt.want) {
				t.Fatalf("errors:\n%swant one containing:\n  %s", got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Fatalf("a secret value leaked:\n%s", got)
			}
		})
	}
}

// aliasBomb is a small document whose aliases expand exponentially.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("stacks:\n  - name: a\n    stack: a\n    programRef: {name: p}\n    config:\n      l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("      l" + itoa(i) + ": &l" + itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + itoa(i-1))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", minimalStack)
	write("sub/b.yml", strings.ReplaceAll(minimalStack, "name: app", "name: other"))
	write("notes.txt", "not yaml")
	write("..data/a.yaml", minimalStack) // a Kubernetes volume's hidden copy
	cfg, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Stacks) != 2 || cfg.Stacks[0].Name != "app" || cfg.Stacks[1].Name != "other" {
		t.Fatalf("stacks = %d", len(cfg.Stacks))
	}
	write("c.yaml", minimalStack)
	_, diags, err := Load(dir)
	if err == nil || !strings.Contains(list(diags), `duplicate stack name "app" (first defined at `+filepath.Join(dir, "a.yaml")+":5:9)") {
		t.Fatalf("want a duplicate error, got %v\n%s", err, list(diags))
	}
}

func TestLoadMissing(t *testing.T) {
	_, diags, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(list(diags), "no such file or directory") {
		t.Fatalf("got %v", err)
	}
	_, diags, err = Load(t.TempDir())
	if err == nil || !strings.Contains(list(diags), "directory holds no *.yaml or *.yml files") {
		t.Fatalf("got %v\n%s", err, list(diags))
	}
}

// TestParseSourceNeverEchoesUserinfo: a refused git+ URL's error never
// repeats what stands before "@", whatever the password holds.
func TestParseSourceNeverEchoesUserinfo(t *testing.T) {
	for _, in := range []string{
		"git+https://user:CANARY@git.example/x.git",
		"git+https://user:CAN/ARY@git.example/x.git",
		"git+https://user:CAN?ARY@git.example/x.git//dir?ref=main",
		"git+https://user:CAN#ARY@git.example/x.git",
		"git+https://CANARY@git.example/x.git",
		"git+https://user:CAN%zzARY@git.example/x.git",
		"git+https://us er:CAN ARY@git.example/x.git",
	} {
		_, err := ParseSource(in)
		if err == nil {
			t.Errorf("%s: accepted", in)
			continue
		}
		if strings.Contains(err.Error(), "CAN") {
			t.Errorf("%s: error repeats the credential: %v", in, err)
		}
	}
}

// TestAliasBombAcrossDocuments: documents that each stay under the node
// budget cannot add up past it: the budget is the whole load's.
func TestAliasBombAcrossDocuments(t *testing.T) {
	var b strings.Builder
	for doc := range 20 {
		fmt.Fprintf(&b, "---\nstacks:\n  - name: s%d\n    stack: s%d\n    programRef: {name: p}\n    config:\n      l0: &l0 [x, x, x, x, x, x, x, x, x]\n", doc, doc)
		for i := 1; i < 7; i++ { // 9^6 = 531,441 nodes: under the budget alone
			fmt.Fprintf(&b, "      l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", "))
		}
	}
	_, diags, err := Parse("bomb.yaml", []byte(b.String()))
	text := fmt.Sprint(diags)
	if err == nil || !strings.Contains(text, "expands to more than") {
		t.Fatalf("20 documents of half a million nodes each: %v\n%v", err, diags)
	}
	if n := strings.Count(text, "expands to more than"); n != 1 {
		t.Errorf("the budget is reported %d times, want once", n)
	}
}

// TestLabels: a stack's metadata labels load, from a manifest and from a
// compact list, for roles that select stacks by them; they are no
// "ignored" note.
func TestLabels(t *testing.T) {
	manifest := strings.Replace(minimalStack, "  name: app\n", "  name: app\n  labels: {team: a, tier: prod}\n", 1)
	compact := "stacks:\n  - name: app\n    labels: {team: a, tier: prod}\n    stack: org/app/dev\n" +
		"    projectRepo: https://example.com/org/app.git\n    branch: main\n"
	for name, src := range map[string]string{"manifest": manifest, "compact": compact} {
		cfg, diags := mustParse(t, src)
		if len(diags) != 0 {
			t.Errorf("%s: %v", name, diags)
		}
		if len(cfg.Stacks) != 1 || !maps.Equal(cfg.Stacks[0].Labels, map[string]string{"team": "a", "tier": "prod"}) {
			t.Errorf("%s: labels %v", name, cfg.Stacks[0].Labels)
		}
	}
}

// TestSamePulumiStack: two stacks that the config says operate on one
// Pulumi stack (the same backend, project and stack) are refused, naming
// both; other projects, backends or stacks, or a project left to the
// program, are not.
func TestSamePulumiStack(t *testing.T) {
	stack := func(name, pulumiStack, extra string) string {
		return "  - name: " + name + "\n    stack: " + pulumiStack + "\n    projectRepo: https://example.com/" + name +
			".git\n    branch: main\n    backend: s3://bucket\n" + extra
	}
	for _, tt := range []struct {
		name, src, want string
	}{
		{"qualified and pinned", stack("a", "org/web/prod", "") + stack("b", "prod", "    project: web\n"),
			`test.yaml:8:12: stacks[1].stack: stack "b" is the same Pulumi stack as stack "a" (defined at test.yaml:2:11)`},
		{"both pinned", stack("a", "prod", "    project: web\n") + stack("b", "prod", "    project: web\n"),
			`test.yaml:9:12: stacks[1].stack: stack "b" is the same Pulumi stack as stack "a" (defined at test.yaml:2:11)`},
		{"other projects", stack("a", "prod", "    project: web\n") + stack("b", "prod", "    project: api\n"), ""},
		{"project left to the program", stack("a", "prod", "") + stack("b", "prod", ""), ""},
		{"other backends", stack("a", "org/web/prod", "") + strings.Replace(stack("b", "org/web/prod", ""), "s3://bucket", "s3://other", 1), ""},
	} {
		_, diags, _ := Parse("test.yaml", []byte("stacks:\n"+tt.src))
		got := list(diags)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: diagnostics %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestStackFields: a mapping with projectRepo or programRef, or two
// fields of a stack that a window has not, looks like a stack; a window,
// even with one misspelt field, does not.
func TestStackFields(t *testing.T) {
	for _, c := range []struct {
		keys, want []string
	}{
		{[]string{"name", "kind", "schedule", "duration", "stacks"}, nil},
		{[]string{"name", "kind", "schedule", "duration", "stack"}, nil},
		{[]string{"kind", "branch", "schedule"}, nil},
		{[]string{"name", "projectRepo"}, []string{"projectRepo"}},
		{[]string{"name", "programRef"}, []string{"programRef"}},
		{[]string{"branch", "name", "stack"}, []string{"branch", "stack"}},
		{[]string{"labels", "name", "stack", "config"}, []string{"stack", "config"}},
	} {
		if got := stackFields(c.keys); !slices.Equal(got, c.want) {
			t.Errorf("stackFields(%v) = %v, want %v", c.keys, got, c.want)
		}
	}
}

// TestStackUnderChangeWindows: a stack pasted under changeWindows: is one
// error that names the likely cause, not one per field; the windows
// beside it are still checked.
func TestStackUnderChangeWindows(t *testing.T) {
	_, diags, err := Load("../../testdata/config/bad/stack-under-changewindows.yaml")
	if err == nil {
		t.Fatal("loaded")
	}
	errs := diags.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "looks like a stack") || !strings.Contains(errs[0].Msg, "under stacks:") {
		t.Fatalf("errors, want one that names a stack pasted under changeWindows:\n%s", list(errs))
	}
}
