package spec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveRefs(t *testing.T) {
	dir := t.TempDir()
	secrets, configMaps := filepath.Join(dir, "secrets"), filepath.Join(dir, "configmaps")
	for path, content := range map[string]string{
		filepath.Join(secrets, "aws", "key"):        "from-file\n",
		filepath.Join(configMaps, "settings", "rg"): "eu\r\n",
		filepath.Join(dir, "token.txt"):             "tok",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := minimalStack + `  envRefs:
    LIT: {type: Literal, literal: {value: lit}}
    ENV: {type: Env, env: {name: STACKD_TEST_VAR}}
    REL: {type: FS, filesystem: {path: token.txt}}
    FILE: {type: Secret, secret: {name: aws, key: key}}
    DOC: {type: Secret, secret: {name: doc, key: k}}
    OUT: {type: StackOutput, stackOutput: {stack: other, output: url}}
    NOFILE: {type: Secret, secret: {name: nope, key: key}}
    NOKEY: {type: Secret, secret: {name: doc, key: missing}}
    NOENV: {type: Env, env: {name: STACKD_UNSET_VAR}}
  configRef:
    region: {name: settings, key: rg}
---
apiVersion: v1
kind: Secret
metadata: {name: doc}
stringData: {k: from-doc}
---
stacks:
  - name: other
    stack: other
    programRef: {name: p}
programs:
  - name: p
    outputs: {url: x}
`
	path := filepath.Join(dir, "stacks.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Stack("app")
	sources := RefSources{
		SecretsDir:    secrets,
		ConfigMapsDir: configMaps,
		LookupEnv: func(k string) (string, bool) {
			return map[string]string{"STACKD_TEST_VAR": "env"}[k], k == "STACKD_TEST_VAR"
		},
		StackOutput: func(stack, output string) (string, error) { return stack + "." + output, nil },
	}
	for key, want := range map[string]string{"LIT": "lit", "ENV": "env", "REL": "tok", "FILE": "from-file", "DOC": "from-doc", "OUT": "other.url"} {
		got, err := cfg.ResolveRef(s, "envRefs."+key, s.Spec.EnvRefs[key], sources)
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", key, got, err, want)
		}
	}
	if got, err := cfg.ResolveConfigRef("configRef.region", s.Spec.ConfigRef["region"], sources); err != nil || got != "eu" {
		t.Errorf("configRef = %q, %v", got, err)
	}
	for key, want := range map[string]string{
		"NOFILE": "envRefs.NOFILE: open " + filepath.Join(secrets, "nope", "key") + ": no such file or directory",
		"NOKEY":  `envRefs.NOKEY: Secret "doc" has no key "missing"`,
		"NOENV":  "envRefs.NOENV: environment variable STACKD_UNSET_VAR is not set",
	} {
		_, err := cfg.ResolveRef(s, "envRefs."+key, s.Spec.EnvRefs[key], sources)
		var refErr *RefError
		if err == nil || err.Error() != want || !errors.As(err, &refErr) {
			t.Errorf("%s: error %v, want %q", key, err, want)
		}
	}
	_, err = cfg.ResolveRef(s, "envRefs.NOFILE", s.Spec.EnvRefs["NOFILE"], sources)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error %v does not wrap fs.ErrNotExist", err)
	}
	if _, err := cfg.ResolveRef(s, "x", s.Spec.EnvRefs["FILE"], RefSources{}); err == nil || !strings.Contains(err.Error(), "no directory is configured") {
		t.Errorf("without a secrets dir: %v", err)
	}
}
