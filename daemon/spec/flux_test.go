package spec

import (
	"strings"
	"testing"
)

// fluxRepo is a Flux GitRepository in the shape of PKO's Flux example.
const fluxRepo = `
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: infra
  namespace: default
spec:
  interval: 1m
  url: https://github.com/acme/infra.git
  ref:
    branch: main
  secretRef:
    name: infra-git
  ignore: "*.md"
`

const fluxStack = `
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: app
spec:
  stack: acme/app/dev
  fluxSource:
    sourceRef:
      apiVersion: source.toolkit.fluxcd.io/v1
      kind: GitRepository
      name: infra
    dir: stacks/app
  destroyOnFinalize: true
`

func TestFluxSource(t *testing.T) {
	cfg, diags := mustParse(t, fluxRepo+fluxStack)
	s := cfg.Stack("app").Spec
	if s.ProjectRepo != "https://github.com/acme/infra.git" || s.Branch != "main" || s.RepoPath() != "stacks/app" || s.GitAuthSecret != "infra-git" {
		t.Fatalf("resolved spec: repo %q branch %q dir %q secret %q", s.ProjectRepo, s.Branch, s.RepoDir, s.GitAuthSecret)
	}
	if len(diags.Errors()) != 0 {
		t.Fatalf("errors: %v", diags.Errors())
	}
	notes := joinDiags(diags.Notes())
	if !strings.Contains(notes, "spec.interval: note: ignored: stackd polls at the stacks' resyncFrequencySeconds") ||
		strings.Contains(notes, "fluxSource") {
		t.Errorf("notes:\n%s", notes)
	}

	for _, tc := range []struct{ ref, branch, commit string }{
		{"tag: v1.2.0", "refs/tags/v1.2.0", ""},
		{"{semver: '>=1.0.0 <2.0.0', tag: v0.1.0}", "semver:>=1.0.0 <2.0.0", ""},
		{"commit: 0123456789abcdef0123456789abcdef01234567", "", "0123456789abcdef0123456789abcdef01234567"},
		{"name: refs/heads/release", "refs/heads/release", ""},
		{"{}", "master", ""},
	} {
		cfg, _ := mustParse(t, strings.Replace(fluxRepo, "branch: main", tc.ref, 1)+fluxStack)
		if s := cfg.Stack("app").Spec; s.Branch != tc.branch || s.Commit != tc.commit {
			t.Errorf("ref %s: branch %q commit %q", tc.ref, s.Branch, s.Commit)
		}
	}
}

// TestFluxSourceErrors: one clear message each, never a note that the
// field is ignored beside an error on it.
func TestFluxSourceErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"OCIRepository", fluxRepo + strings.Replace(fluxStack, "kind: GitRepository", "kind: OCIRepository", 1),
			"spec.fluxSource.sourceRef.kind: a Flux OCIRepository is not a source stackd reads"},
		{"Bucket", fluxRepo + strings.Replace(fluxStack, "kind: GitRepository", "kind: Bucket", 1),
			"spec.fluxSource.sourceRef.kind: a Flux Bucket is not a source stackd reads"},
		{"missing", fluxStack, `spec.fluxSource.sourceRef.name: no Flux GitRepository named "infra" in the config`},
		{"semver", strings.Replace(fluxRepo, "branch: main", "semver: '>=1.x.0'", 1) + fluxStack, `Flux GitRepository "infra": semver range ">=1.x.0"`},
		{"both", fluxRepo + strings.Replace(fluxStack, "  destroyOnFinalize: true", "  projectRepo: https://x.example/r.git\n  branch: main", 1),
			"spec.fluxSource: set one of fluxSource, projectRepo and programRef"},
	} {
		_, diags, err := Parse("test.yaml", []byte(tc.doc))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		errs := diags.Errors()
		if len(errs) != 1 || !strings.Contains(errs[0].String(), tc.want) {
			t.Errorf("%s: errors %v, want one with %q", tc.name, errs, tc.want)
		}
		if strings.Contains(joinDiags(diags.Notes()), "fluxSource") {
			t.Errorf("%s: a note on fluxSource beside the error: %v", tc.name, diags.Notes())
		}
	}
}

func joinDiags(ds Diagnostics) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return strings.Join(out, "\n")
}

// TestWorkspaceTemplateVolumes: a file:// backend or an env value under a
// path that workspaceTemplate mounts in PKO's pod gets a note: stackd
// ignores workspaceTemplate, so the path is on its own machine.
func TestWorkspaceTemplateVolumes(t *testing.T) {
	_, diags := mustParse(t, minimalStack+`  backend: file:///state/pulumi
  envRefs:
    KUBECONFIG: {type: Literal, literal: {value: /etc/kube/config}}
    REGION: {type: Literal, literal: {value: eu-west-1}}
  workspaceTemplate:
    spec:
      podTemplate:
        spec:
          containers:
            - name: pulumi
              volumeMounts:
                - {name: state, mountPath: /state}
                - {name: kube, mountPath: /etc/kube/}
`)
	notes := joinDiags(diags.Notes())
	for _, want := range []string{
		"spec.backend: note: a path in /state, which workspaceTemplate mounts into PKO's workspace pod",
		"spec.envRefs.KUBECONFIG: note: a path in /etc/kube/, which workspaceTemplate mounts",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "REGION") || strings.Contains(notes, "/etc/kube/config") {
		t.Errorf("a note names an unrelated value or quotes a literal:\n%s", notes)
	}
}

// TestGitHubAppAuth: githubApp's references resolve into the app's
// credentials, which gitwatch exchanges for an installation token.
func TestGitHubAppAuth(t *testing.T) {
	cfg, _ := mustParse(t, minimalStack+`  gitAuth:
    githubApp:
      appID: {type: Literal, literal: {value: "17"}}
      installationID: {type: Secret, secret: {name: app, key: installation}}
      privateKey: {type: Secret, secret: {name: app, key: key}}
---
apiVersion: v1
kind: Secret
metadata: {name: app}
stringData: {installation: "4242", key: "-----BEGIN RSA PRIVATE KEY-----"}
`)
	a, err := cfg.GitAuth(cfg.Stack("app"), RefSources{})
	if err != nil || a.GitHubApp == nil || a.GitHubApp.AppID != "17" || a.GitHubApp.InstallationID != "4242" ||
		!strings.Contains(strings.Join(a.Secrets(), " "), "BEGIN RSA PRIVATE KEY") {
		t.Fatalf("auth %+v, %v", a, err)
	}
}
