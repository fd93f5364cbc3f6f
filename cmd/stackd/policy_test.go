package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestValidatePolicies(t *testing.T) {
	code, stdout, _ := stackd(t, "validate", "--policy", "../../testdata/policy/good")
	if code != exitOK || !strings.Contains(stdout, "ok: 1 policy file(s), policies stackd.files") {
		t.Fatalf("good policies: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = stackd(t, "validate", "--policy", "../../testdata/policy/bad", "../../testdata/config/good/pko-basic.yaml")
	if code != exitFail || !strings.Contains(stdout, "../../testdata/policy/bad/files.rego:4:1: ") || !strings.Contains(stdout, "ok: ") {
		t.Fatalf("bad policies, good config: exit %d\n%s", code, stdout)
	}
}

// TestPolicyGitSource: --policy git+URL//PATH loads the policies of the
// branch's commit at start; a push to its branch makes it poll: a new
// commit with a policy that does not compile leaves the commit before in
// force and says why, a fixed commit is loaded. A push to another branch
// or repository does not concern it.
func TestPolicyGitSource(t *testing.T) {
	r := newRepo(t)
	files := func(src string) map[string]string { return map[string]string{"policies/files.rego": src} }
	first := r.commit(files(authorPolicy))
	f := &runFlags{sourceFlags: sourceFlags{pollInterval: time.Hour}, gitTimeout: 10 * time.Second,
		policyFlags: policyFlags{policy: "git+file://" + r.dir + "//policies?ref=main"}}
	pols, err := openPolicies(f, nil, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer pols.stop()
	pol := pols.policies
	push := func(url, branch string) bool { return pols.git.push(spec.RepoKeys([]string{url}), branch) }
	if push("file://"+r.dir, "dev") || push("file:///elsewhere", "main") {
		t.Error("a push to another branch or repository concerns the policy source")
	}
	status := func() model.PolicyStatus { return pol.(daemon.PolicyReporter).PolicyStatus() }
	if st := status(); !st.Successful || st.Commit != first || strings.Join(st.Policies, ",") != "stackd.review" {
		t.Fatalf("status at start %+v, want the first commit's policy", st)
	}
	in := model.PolicyInput{Stack: "app", PullRequest: 2, Author: "bob"}
	if v, err := pol.Evaluate(context.Background(), in); err != nil || len(v.Warn) != 1 {
		t.Fatalf("verdict %+v, %v; want the first commit's warning", v, err)
	}

	waitFor := func(what string, ok func(model.PolicyStatus) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok(status()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, status())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	r.commit(files("package stackd.review\n\nwarn contains msg if {\n"))
	if !push("file://"+r.dir, "main") {
		t.Fatal("a push to the branch does not concern the policy source")
	}
	waitFor("the broken commit", func(st model.PolicyStatus) bool { return !st.Successful })
	if st := status(); st.Commit != first || !strings.Contains(st.Error, "file://"+r.dir+"//policies/files.rego:4:0: ") {
		t.Errorf("status after a broken commit %+v, want the first commit in force and the error", st)
	}
	if v, err := pol.Evaluate(context.Background(), in); err != nil || len(v.Warn) != 1 {
		t.Errorf("after a broken commit: verdict %+v, %v; want the first commit's warning", v, err)
	}
	fixed := r.commit(files("package stackd.review\n\ndeny contains \"no\" if input.author == \"bob\"\n"))
	push("file://"+r.dir, "main")
	waitFor("the fixed commit", func(st model.PolicyStatus) bool { return st.Successful && st.Commit == fixed })
	if v, err := pol.Evaluate(context.Background(), in); err != nil || !v.Denied() {
		t.Errorf("after the fixed commit: verdict %+v, %v; want its denial", v, err)
	}
}
