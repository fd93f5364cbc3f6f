package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigSecrets(t *testing.T) {
	dir := t.TempDir()
	for _, f := range [][3]string{{"db", "password", "from-file-1"}, {"creds", "AWS_SECRET", "from-file-2"}, {"pulumi", "accessToken", "from-file-3"}} {
		p := filepath.Join(dir, f[0], f[1])
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f[2]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const text = `
apiVersion: v1
kind: Secret
metadata: {name: doc}
stringData: {k: from-doc-1}
---
stacks:
  - name: s
    stack: dev
    projectRepo: https://git.example/s.git
    branch: main
    secrets: {a: literal-1}
    secretsRef:
      b: {type: Secret, secret: {name: db, key: password}}
      c: {type: StackOutput, stackOutput: {stack: t, output: x}}
      missing: {type: Secret, secret: {name: nope, key: nope}}
    envRefs:
      TOKEN: {type: Env, env: {name: STACKD_TEST_TOKEN}}
      PLAIN_ENV: {type: Env, env: {name: STACKD_TEST_PLAIN}}
    envSecrets: [creds]
    accessTokenSecret: pulumi
    gitAuth:
      accessToken: {type: Literal, literal: {value: git-token-1}}
    reviewStacks:
      enabled: true
      config: {size: plain-2}
      secretsRef:
        d: {type: Literal, literal: {value: review-literal-1}}
  - {name: t, stack: dev, projectRepo: https://git.example/t.git, branch: main}
`
	cfg, diags, err := Parse("stacks.yaml", []byte(text))
	if err != nil {
		t.Fatalf("%v %v", err, diags)
	}
	env := map[string]string{"STACKD_TEST_TOKEN": "env-token-1", "STACKD_TEST_PLAIN": "plain-1"}
	refs := RefSources{SecretsDir: dir, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		StackOutput: func(string, string) (string, error) { t.Error("a stack output was read"); return "", nil }}
	got := strings.Join(ConfigSecrets(cfg, refs), " ")
	for _, want := range []string{"from-doc-1", "literal-1", "from-file-1", "env-token-1", "literal-1",
		"from-file-2", "from-file-3", "git-token-1", "review-literal-1"} {
		if !strings.Contains(got, want) {
			t.Errorf("secrets %q lack %s", got, want)
		}
	}
	for _, not := range []string{"plain-1", "plain-2"} {
		if strings.Contains(got, not) {
			t.Errorf("secrets %q hold the plain value %s", got, not)
		}
	}
}
