package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/review"
)

// credsManifestProgram is credsProgram taking the config greeting too, as
// the manifests of the forge tests give it (see manifest).
var credsManifestProgram = strings.Replace(credsProgram, "  peek:\n    type: String\n",
	"  peek:\n    type: String\n  greeting:\n    type: String\n", 1)

// TestE2EPullRequestPreviewCredentials: a pull request cannot choose the
// cloud role its code runs with. In force, stack b's previews take the
// read role b-read. The pull request points b's readRoleArn at an admin
// role and adds stack c with credentials of its own. b's preview runs
// with a token of stack b, read scope, the pull request's number and
// author, and the role in force; c's runs with no token and no role.
func TestE2EPullRequestPreviewCredentials(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs, manifests := g.repo("infra"), g.repo("manifests")
	programs.commit(map[string]string{"app/Pulumi.yaml": credsManifestProgram})
	out := outDir(t)
	// Each operation leaves the token it got and the role it was given.
	peek := func(name string) string {
		return fmt.Sprintf(`      peek: 'n=$(date +%%s%%N); [ -n "$STACKD_ID_TOKEN" ] && cat "$STACKD_ID_TOKEN" > %[1]s/%[2]s-$n.jwt; echo "$AWS_ROLE_ARN" > %[1]s/%[2]s-$n.role; echo ok'
`, out, name)
	}
	creds := func(read string) string {
		return fmt.Sprintf("    credentials:\n      aws: {roleArn: \"arn:aws:iam::123456789012:role/b-write\", readRoleArn: %q}\n"+
			"      token: {audience: vault, env: STACKD_ID_TOKEN}\n", "arn:aws:iam::123456789012:role/"+read)
	}
	b := func(greeting, read string) string {
		return manifest("b", g.url("infra"), out, greeting) + peek("b") + creds(read)
	}
	g.startManifests(manifests, issuing, map[string]string{"b": b("hello", "b-read")})
	deployed, _ := filepath.Glob(filepath.Join(out, "b-*.jwt"))

	pr := &pullRequest{repo: "acme/manifests", name: "manifests", number: 5}
	g.push(manifests, pr, map[string]string{
		"stacks/b.yaml": b("bonjour", "admin"),
		"stacks/c.yaml": manifest("c", g.url("infra"), out, "hi") + peek("c") + creds("admin"),
	})
	g.hook(pr, "opened")
	for _, s := range []string{"stackd/b", "stackd/c"} {
		if st := g.waitStatus(pr, s); st.State != review.Success {
			t.Fatalf("status %s: %+v", s, st)
		}
	}
	all, _ := filepath.Glob(filepath.Join(out, "b-*.jwt"))
	if len(all) != len(deployed)+1 {
		t.Fatalf("b's preview left %d tokens, want 1", len(all)-len(deployed))
	}
	previewed := all[len(all)-1] // names sort by time
	if role := readFile(t, strings.TrimSuffix(previewed, ".jwt")+".role"); strings.TrimSpace(role) != "arn:aws:iam::123456789012:role/b-read" {
		t.Errorf("b's preview ran with role %q, not the read role in force", role)
	}
	verifier := g.in.verifier()
	idt, err := verifier.Verify(context.Background(), strings.TrimSpace(readFile(t, previewed)))
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Stack, Scope, Operation, Author string
		PullRequest                     int `json:"pull_request"`
		Commit                          string
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if claims.Stack != "b" || claims.Scope != "read" || claims.Operation != "preview" || claims.PullRequest != 5 || claims.Commit == "" {
		t.Errorf("b's preview token: %+v", claims)
	}
	if toks, _ := filepath.Glob(filepath.Join(out, "c-*.jwt")); len(toks) != 0 {
		t.Errorf("the stack the pull request adds got a token: %v", toks)
	}
	roles, _ := filepath.Glob(filepath.Join(out, "c-*.role"))
	if len(roles) != 1 || strings.TrimSpace(readFile(t, roles[0])) != "" {
		t.Errorf("the stack the pull request adds ran with a role, or did not run: %v", roles)
	}
}
