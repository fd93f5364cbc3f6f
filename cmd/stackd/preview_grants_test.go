package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// TestE2EPullRequestPreviewUngrantedSecret: a pull request to the
// manifests repository that gives a stack an environment variable from a
// Secret of --secrets-dir that no stack references has it previewed with
// a placeholder: the Secret's value (a canary, which the stack's program
// would print word by word, past any scrubbing) reaches neither the
// forge nor stackd's API, and the comment says what was not resolved.
// The Secret the config in force already gives the stack still resolves.
func TestE2EPullRequestPreviewUngrantedSecret(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	const (
		granted   = "granted-CANARY-3f9a01"
		ungranted = "ungranted CANARY c47e5d"
	)
	secrets := t.TempDir()
	for file, v := range map[string]string{"app/token": granted, "payments/apiKey": ungranted} {
		path := filepath.Join(secrets, filepath.FromSlash(file))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g := newForgeRig(t, review.GitHub)
	programs, manifests := g.repo("infra"), g.repo("manifests")
	// A program that shows the words of an environment variable: each
	// word is shorter than the value that scrubbing knows.
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1") + `  shown:
    fn::split:
      - " "
      - fn::invoke:
          function: stackdtest:index:getEnv
          arguments: {name: SHOWN}
          return: value
`})
	out := outDir(t)
	stack := func(greeting, more string) string {
		return manifest("b", g.url("infra"), out, greeting) + "    secretsRef:\n      token: {type: Secret, secret: {name: app, key: token}}\n" + more
	}
	g.startManifests(manifests, func(f *runFlags) { f.secretsDir = secrets }, map[string]string{"b": stack("hello", "")})

	pr := &pullRequest{repo: "acme/manifests", name: "manifests", number: 5}
	g.push(manifests, pr, map[string]string{"stacks/b.yaml": stack("bonjour",
		"    envRefs:\n      SHOWN: {type: Secret, secret: {name: payments, key: apiKey}}\n")})
	g.hook(pr, "opened")
	if st := g.waitStatus(pr, "stackd/b"); st.State != review.Success {
		t.Errorf("status of b: %+v", st)
	}
	c := g.waitComment(pr)
	if !strings.Contains(c.Body, "**Not resolved in a preview**") || !strings.Contains(c.Body, "`envRefs.SHOWN`") ||
		strings.Contains(c.Body, "`secretsRef.token`") {
		t.Errorf("the comment does not tell that envRefs.SHOWN alone was not resolved:\n%s", c.Body)
	}
	if !strings.Contains(c.Body, `"preview]"`) {
		t.Errorf("the program did not show the placeholder's words: the test would not see the Secret's either:\n%s", c.Body)
	}
	if !strings.Contains(c.Body, `"hello v1" => "bonjour v1"`) {
		t.Errorf("the preview does not show the change of greeting:\n%s", c.Body)
	}

	leaks := []string{ungranted, "c47e5d", granted}
	g.noLeaks(append(leaks, forgeToken)...)
	texts := map[string]string{"the comment": c.Body}
	_, list := g.in.get("/api/v1/previews", nil)
	texts["GET /api/v1/previews"] = string(list)
	var res struct {
		Updates []model.Update `json:"updates"`
	}
	_, history := g.in.get("/api/v1/stacks/b/updates", &res)
	texts["GET /api/v1/stacks/b/updates"] = string(history)
	for _, u := range res.Updates {
		_, log := g.in.get("/api/v1/updates/"+u.ID+"/log", nil)
		texts["the log of "+u.ID] = string(log)
	}
	for where, text := range texts {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s shows %q:\n%s", where, leak, text)
			}
		}
	}
}
