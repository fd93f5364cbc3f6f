package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// noFileProgram is program without its File: applying it deletes the File.
const noFileProgram = `name: e2e
runtime: yaml
configuration:
  path:
    type: String
  greeting:
    type: String
    default: hello
outputs:
  gone: yes
`

// authorPolicy warns about every pull request, naming its author, and
// denies nothing.
const authorPolicy = `package stackd.review

warn contains msg if {
	input.pullRequest > 0
	msg := sprintf("pull request %d by %s changes %s", [input.pullRequest, input.author, input.stack])
}
`

// policyDir is a policy directory holding the project's example policy
// (testdata/policy/good) and authorPolicy.
func policyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("../../testdata/policy/good/files.rego")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"files.rego": string(src), "review.rego": authorPolicy} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestE2EPolicyDeniesDelete is the acceptance of policies: with a Rego
// policy that denies deleting a stackdtest:index:File, a pull request
// that removes the File fails its status and its comment lists the
// denial (and a warning naming the pull request's author); once merged,
// the commit is not applied: the File stays, the stack stalls with
// PolicyDenied and the message, the metrics count the denials. A policy
// saved broken keeps the policies in force and says so in the API and
// the metrics.
func TestE2EPolicyDeniesDelete(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	v1 := programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := outDir(t)
	file := filepath.Join(out, "app.txt")
	policies := policyDir(t)
	g.start(manifest("app", g.url("infra"), out, "hello"), func(f *runFlags) { f.policy, f.watchConfig = policies, true })
	in := g.in
	in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})
	if got := readFile(t, file); got != "hello v1" {
		t.Fatalf("file = %q after the first deploy", got)
	}

	// The pull request that removes the File.
	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 4}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": noFileProgram})
	g.hook(pr, "opened")
	st := g.waitStatus(pr, "stackd/app")
	denial := "deleting " + file + " is not allowed (stack app)"
	if st.State != review.Failure || !strings.Contains(st.Description, "Denied by policy: ") {
		t.Errorf("status %+v, want a failure saying the policy denies the change", st)
	}
	c := g.waitComment(pr)
	for _, want := range []string{
		"🚫 denied by policy",
		"**Policies deny the change of `app`; it will not be applied:**\n\n- `stackd.files`: " + denial + "\n",
		"- `stackd.review`: pull request 4 by alice changes app\n",
	} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("the comment lacks %q:\n%s", want, c.Body)
		}
	}

	// Merged: the commit is not applied.
	merged := programs.commit(map[string]string{"app/Pulumi.yaml": noFileProgram})
	v := in.waitStack("app", "the denial", 2*time.Minute, func(v model.StackView) bool {
		return stalledFor(model.ReasonPolicyDenied)(v) && v.Status.Gate != nil && v.Status.Gate.Commit == merged
	})
	if c := v.Status.Condition(model.ConditionStalled); !strings.Contains(c.Message, "denied by policy: stackd.files: "+denial) {
		t.Errorf("stalled message %q, want the denial", c.Message)
	}
	if g := v.Status.Gate; g.State != model.GatePolicyDenied || len(g.Violations) != 1 || g.Violations[0].Message != denial {
		t.Errorf("gate %+v, want the policy's denial", g)
	}
	if got := readFile(t, file); got != "hello v1" {
		t.Fatalf("a denied commit changed the file to %q", got)
	}
	if page := in.page("/stacks/app"); !strings.Contains(page, "Change denied by policy") || !strings.Contains(page, denial) {
		t.Error("the stack page does not show the denial")
	}
	var status bytes.Buffer
	if err := statusCommand(in.clientArgs("app"), &status); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "PolicyDenied: denied by policy: stackd.files: deleting ") {
		t.Errorf("stackd status app does not show the denial:\n%s", status.String())
	}
	_, metrics := in.get("/metrics", nil)
	for _, want := range []string{
		`stackd_policy_violations_total{level="deny",policy="stackd.files",stack="app"} 2`,
		`stackd_policy_violations_total{level="warn",policy="stackd.review",stack="app"} 1`,
		"stackd_policy_last_reload_successful 1",
	} {
		if !bytes.Contains(metrics, []byte(want+"\n")) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// A broken save: the policies in force stay, the API and the metric
	// say why.
	if err := os.WriteFile(filepath.Join(policies, "files.rego"), []byte("package stackd.files\n\ndeny contains msg if {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg model.ConfigStatus
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, body := in.get("/api/v1/config", &cfg); code != http.StatusOK {
			t.Fatalf("GET /api/v1/config: %d %s", code, body)
		}
		if p := cfg.Policies; p != nil && !p.Successful {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broken policy is not reported: %+v", cfg.Policies)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p := cfg.Policies; !strings.Contains(p.Error, filepath.Join(policies, "files.rego")+":4:0: ") ||
		strings.Join(p.Policies, ",") != "stackd.files,stackd.review" {
		t.Errorf("policy status %+v, want the error and the policies in force", p)
	}
	if _, metrics = in.get("/metrics", nil); !bytes.Contains(metrics, []byte("stackd_policy_last_reload_successful 0\n")) {
		t.Error("/metrics lacks stackd_policy_last_reload_successful 0")
	}
}

// absolutePathsPolicy denies a File written to an absolute path, and
// names the path in its message.
const absolutePathsPolicy = `package stackd.paths

deny contains msg if {
	some step in input.steps
	step.type == "stackdtest:index:File"
	startswith(step.new.path, "/")
	msg := sprintf("%s writes to the absolute path %s", [step.urn, step.new.path])
}
`

// secretFileProgram writes a File at path, which it calls a secret.
func secretFileProgram(path string) string {
	return `name: e2e
runtime: yaml
configuration:
  path:
    type: String
  greeting:
    type: String
    default: hello
resources:
  hidden:
    type: stackdtest:index:File
    properties:
      path:
        fn::secret: ` + path + `
      content: ${greeting}
`
}

// TestE2EPolicySeesSecrets is the regression test of a policy blinded by
// fn::secret: a rule that denies writing a File to an absolute path
// denies it as well when the program calls the path a secret, in a pull
// request's preview and at the gate once merged, and the File is not
// written. What shows the denial (the forge's status and comment, the
// gate, the stack's status, page and updates, `stackd status`, the
// preview's log and the daemon's own log) shows "[secret]" where the
// path was, never the path.
func TestE2EPolicySeesSecrets(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	v1 := programs.commit(map[string]string{"app/Pulumi.yaml": noFileProgram})
	out := t.TempDir()
	hidden := filepath.Join(out, "hidden-4711.txt")
	policies := t.TempDir()
	if err := os.WriteFile(filepath.Join(policies, "paths.rego"), []byte(absolutePathsPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start(manifest("app", g.url("infra"), out, "hello"), func(f *runFlags) { f.policy = policies })
	in := g.in
	in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})
	const urn = "urn:pulumi:app::e2e::stackdtest:index:File::hidden"
	denial := urn + " writes to the absolute path [secret]"

	// The pull request that adds the File.
	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 5}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": secretFileProgram(hidden)})
	g.hook(pr, "opened")
	if st := g.waitStatus(pr, "stackd/app"); st.State != review.Failure || !strings.Contains(st.Description, "Denied by policy: ") {
		t.Errorf("status %+v, want a failure saying the policy denies the change", st)
	}
	c := g.waitComment(pr)
	if !strings.Contains(c.Body, "- `stackd.paths`: "+denial+"\n") {
		t.Errorf("the comment lacks the denial %q:\n%s", denial, c.Body)
	}
	if strings.Contains(c.Body, "--plan") || strings.Contains(c.Body, "hidden-4711") {
		t.Errorf("the comment's diff names the plan saved for the policies, or the path:\n%s", c.Body)
	}

	// Merged: the commit is not applied.
	merged := programs.commit(map[string]string{"app/Pulumi.yaml": secretFileProgram(hidden)})
	v := in.waitStack("app", "the denial", 2*time.Minute, func(v model.StackView) bool {
		return stalledFor(model.ReasonPolicyDenied)(v) && v.Status.Gate != nil && v.Status.Gate.Commit == merged
	})
	g2 := v.Status.Gate
	if g2.State != model.GatePolicyDenied || len(g2.Violations) != 1 || g2.Violations[0].Message != denial {
		t.Errorf("gate %+v, want the policy's denial", g2)
	}
	for _, s := range g2.Steps {
		if s.URN == urn && s.New["path"] != "[secret]" {
			t.Errorf("the gate's step %+v shows the path", s)
		}
	}
	if _, err := os.Stat(hidden); !os.IsNotExist(err) {
		t.Fatalf("a denied commit wrote the File: %v", err)
	}
	var status bytes.Buffer
	if err := statusCommand(in.clientArgs("app"), &status); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "PolicyDenied: denied by policy: stackd.paths: "+urn) {
		t.Errorf("stackd status app does not show the denial:\n%s", status.String())
	}
	_, view := in.get("/api/v1/stacks/app", nil)
	_, updates := in.get("/api/v1/stacks/app/updates", nil)
	_, log := in.get("/api/v1/updates/"+g2.Update+"/log", nil)
	shown := map[string]string{"the stack's view": string(view), "its updates": string(updates), "the preview's log": string(log),
		"its page": in.page("/stacks/app"), "stackd status": status.String(), "the daemon's log": in.logs.String()}
	for what, text := range shown {
		if strings.Contains(text, "hidden-4711") {
			t.Errorf("%s shows the secret path:\n%s", what, text)
		}
	}
	g.noLeaks("hidden-4711")
}

// TestE2EPolicyDenialLog: under --policy, the log of a denied change,
// as `stackd logs` prints it, holds the verdict (the policy, its message
// and the resource the change would have deleted) and not Pulumi's advice
// to run `pulumi up --plan=...`; a program's error is the update's error,
// not one of "preview before the update".
func TestE2EPolicyDenialLog(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	policies := t.TempDir()
	src, err := os.ReadFile("../../testdata/policy/good/files.rego")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(policies, "files.rego"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "", func(f *runFlags) { f.policy = policies })
	in.waitStack("app", "first deploy", 2*time.Minute, isReady)

	r.commit(map[string]string{"Pulumi.yaml": noFileProgram})
	in.waitStack("app", "the denial", 2*time.Minute, stalledFor(model.ReasonPolicyDenied))
	var logs bytes.Buffer
	if err := logsCommand(in.clientArgs("app"), &logs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"policy denial (stackd.files): deleting " + out + " is not allowed (stack app)\n",
		"  delete urn:pulumi:app::e2e::stackdtest:index:File::note\n",
		"the change is held: nothing was applied\n",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("stackd logs lacks %q:\n%s", want, logs.String())
		}
	}
	for _, hint := range []string{"--plan", "Update plan written"} {
		if strings.Contains(logs.String(), hint) {
			t.Errorf("stackd logs shows Pulumi's plan hint %q:\n%s", hint, logs.String())
		}
	}

	broken := r.commit(map[string]string{"Pulumi.yaml": strings.Replace(program("v2"), "${path}", "${nowhere}", 1)})
	v := in.waitStack("app", "the program's failure", 2*time.Minute, func(v model.StackView) bool {
		u := v.Status.LastUpdate
		return u != nil && u.State == model.UpdateFailed && u.LastAttemptedCommit == broken
	})
	if msg := v.Status.LastUpdate.Message; !strings.Contains(msg, `"nowhere" not found`) || strings.Contains(msg, "preview before") {
		t.Errorf("failure message %q, want the program's error alone", msg)
	}
}
