package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileGit is an expander whose git generators yield what a committer
// to the generator's repository wrote in a file: here host paths and a
// variable of the daemon, where the template puts parameters.
func hostileGit(params map[string]any) Expander {
	return func(set *StackSet) ([]Generated, error) {
		return []Generated{{Params: params, Generator: "stackSets[0].generators[0]", Origin: "envs/x/config.yaml"}}, nil
	}
}

const hostileSet = `stackSets:
  - name: teams
    generators:
      - git:
          repoURL: https://example.com/org/teams.git
          files:
            - path: teams/*/config.yaml
    template:
      metadata:
        name: "team-{{.team}}"
      spec:
        stack: "org/team/{{.team}}"
        projectRepo: "{{.repo}}"
        branch: main
        backend: "{{.backend}}"
        envRefs:
          CREDS:
            type: FS
            filesystem: {path: "{{.credsFile}}"}
          TOKEN:
            type: Env
            env: {name: "{{.tokenVar}}"}
          OPERATORS:
            type: FS
            filesystem: {path: /etc/operator-creds}
`

// TestGitParametersAreConfinedAsGit is the attack of a committer to a git
// generator's repository on a set of a local config whose template puts
// parameters into fields that name the host: a file to read, a variable
// of the daemon, a file backend, a local repository. Each is refused as
// it would be in a config read from Git; what the template writes itself
// (OPERATORS) stays the local config's.
func TestGitParametersAreConfinedAsGit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stacks.yaml")
	if err := os.WriteFile(file, []byte(hostileSet), 0o600); err != nil {
		t.Fatal(err)
	}
	params := map[string]any{
		"team": "x", "repo": "/var/lib/other-team/repo", "backend": "file:///home/operator",
		"credsFile": "/etc/shadow", "tokenVar": "STACKD_API_TOKEN",
	}
	in := []Input{{Source: dir, Path: file, Shown: "stacks.yaml"}}
	_, diags, err := LoadInputsExpanding(in, hostileGit(params))
	if err == nil {
		t.Fatal("a template filling host paths from a git generator's parameters loaded")
	}
	msgs := fmt.Sprint(diags.Errors())
	for _, field := range []string{"projectRepo", "backend", "envRefs.CREDS"} {
		if !strings.Contains(msgs, "template.spec."+field) {
			t.Errorf("no error at %s:\n%s", field, msgs)
		}
	}
	if strings.Contains(msgs, "OPERATORS") || strings.Contains(msgs, "TOKEN") {
		t.Errorf("the template's own FS reference was refused:\n%s", msgs)
	}
	if strings.Contains(msgs, "/etc/shadow") || strings.Contains(msgs, "STACKD_API_TOKEN") {
		t.Errorf("an error quotes a parameter:\n%s", msgs)
	}
}

// TestGitParametersReadNoDaemonVariable: an Env reference whose name a
// git generator's parameters filled reads only the variables
// --env-ref-allow allows, as one of a config from Git; the template's own
// FS reference reads its file.
func TestGitParametersReadNoDaemonVariable(t *testing.T) {
	dir := t.TempDir()
	file, creds := filepath.Join(dir, "stacks.yaml"), filepath.Join(dir, "creds")
	src := strings.NewReplacer(`"{{.repo}}"`, "https://example.com/org/app.git", `backend: "{{.backend}}"`, "",
		"/etc/operator-creds", creds).Replace(hostileSet)
	src = strings.Replace(src, "          CREDS:\n            type: FS\n            filesystem: {path: \"{{.credsFile}}\"}\n", "", 1)
	for name, data := range map[string]string{file: src, creds: "operator's"} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	params := map[string]any{"team": "x", "tokenVar": "STACKD_API_TOKEN"}
	cfg, diags, err := LoadInputsExpanding([]Input{{Source: dir, Path: file, Shown: "stacks.yaml"}}, hostileGit(params))
	if err != nil {
		t.Fatalf("%v\n%s", err, diags)
	}
	s := cfg.Stack("team-x")
	env := func(string) (string, bool) { return "the daemon's token", true }
	refs := RefSources{LookupEnv: env}
	if v, err := cfg.ResolveRef(s, "envRefs.TOKEN", s.Spec.EnvRefs["TOKEN"], refs); err == nil {
		t.Fatalf("a variable named by a git generator's parameters was read: %q", v)
	}
	refs.EnvAllow = []string{"STACKD_API_TOKEN"}
	if _, err := cfg.ResolveRef(s, "envRefs.TOKEN", s.Spec.EnvRefs["TOKEN"], refs); err != nil {
		t.Fatalf("an allowed variable: %v", err)
	}
	if v, err := cfg.ResolveRef(s, "envRefs.OPERATORS", s.Spec.EnvRefs["OPERATORS"], refs); err != nil || v != "operator's" {
		t.Fatalf("the template's own file: %q, %v", v, err)
	}
}

// TestListParametersStayTheConfigs: a list generator's parameters are
// written in the config, by its author: a local config's set may put them
// anywhere.
func TestListParametersStayTheConfigs(t *testing.T) {
	src := strings.Replace(hostileSet, `      - git:
          repoURL: https://example.com/org/teams.git
          files:
            - path: teams/*/config.yaml`, `      - list:
          elements:
            - {team: x, repo: /srv/repo, backend: "file:///srv/state", credsFile: /etc/creds, tokenVar: TOKEN}`, 1)
	cfg, diags, err := loadSets(t, src)
	if err != nil {
		t.Fatalf("%v\n%s", err, diags)
	}
	if s := cfg.Stack("team-x"); s == nil || s.Spec.Backend != "file:///srv/state" {
		t.Fatalf("team-x: %+v", s)
	}
}
