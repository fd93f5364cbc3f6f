package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
)

// noDelete denies deleting a File and warns about any replacement.
const noDelete = `package stackd.files

deny contains msg if {
	some step in input.steps
	step.op == "delete"
	step.type == "stackdtest:index:File"
	msg := sprintf("%s may not be deleted (stack %s)", [step.urn, input.stack])
}

warn contains msg if {
	some step in input.steps
	step.op == "replace"
	msg := sprintf("%s is replaced", [step.urn])
}
`

// labels denies production changes by anyone but alice, as an array.
const labels = `package team.prod

deny := [msg |
	input.labels.env == "prod"
	input.author != "alice"
	msg := sprintf("pull request %d by %s changes production", [input.pullRequest, input.author])
]
`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func step(op, name string) model.Step {
	return model.Step{Op: op, Type: "stackdtest:index:File", URN: "urn:pulumi:dev::p::stackdtest:index:File::" + name}
}

func TestEvaluate(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"files.rego":            noDelete,
		"team/prod.rego":        labels,
		"team/prod_test.rego":   "package team.prod_test\n\ntest_x if { false }\n",
		".git/hooks/x.rego":     "not rego",
		"README.md":             "not a policy",
		"lib/helpers.rego":      "package lib\n\nis_file(s) if s.type == \"stackdtest:index:File\"\n",
		"files_more/extra.rego": "package stackd.files\n\ndeny contains \"no imports\" if { some s in input.steps; s.op == \"import\" }\n",
	})
	set, err := Load(context.Background(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), ","); got != "stackd.files,team.prod" {
		t.Errorf("names %s, want stackd.files,team.prod", got)
	}
	if len(set.Files) != 4 {
		t.Errorf("files %v, want the four .rego files but the test and the hidden one", set.Files)
	}
	for _, c := range []struct {
		name       string
		in         model.PolicyInput
		deny, warn []string
	}{
		{"no steps", model.PolicyInput{Stack: "s"}, nil, nil},
		{"an update", model.PolicyInput{Stack: "s", Steps: []model.Step{step("update", "a")}}, nil, nil},
		{"a delete and a replace", model.PolicyInput{Stack: "s", Steps: []model.Step{step("delete", "a"), step("replace", "b"), step("import", "c")}},
			[]string{"stackd.files: no imports", "stackd.files: urn:pulumi:dev::p::stackdtest:index:File::a may not be deleted (stack s)"},
			[]string{"stackd.files: urn:pulumi:dev::p::stackdtest:index:File::b is replaced"}},
		{"production by bob", model.PolicyInput{Stack: "s", Labels: map[string]string{"env": "prod"}, PullRequest: 7, Author: "bob"},
			[]string{"team.prod: pull request 7 by bob changes production"}, nil},
		{"production by alice", model.PolicyInput{Stack: "s", Labels: map[string]string{"env": "prod"}, Author: "alice"}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := set.Evaluate(context.Background(), c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := shown(v.Deny, model.PolicyDeny), strings.Join(c.deny, "\n"); got != want {
				t.Errorf("deny\n%s\nwant\n%s", got, want)
			}
			if got, want := shown(v.Warn, model.PolicyWarn), strings.Join(c.warn, "\n"); got != want {
				t.Errorf("warn\n%s\nwant\n%s", got, want)
			}
			if v.Denied() != (len(c.deny) > 0) {
				t.Errorf("denied %v", v.Denied())
			}
		})
	}
}

func shown(vs []model.Violation, level string) string {
	var lines []string
	for _, v := range vs {
		if v.Level != level {
			return "wrong level " + v.Level
		}
		lines = append(lines, v.Policy+": "+v.Message)
	}
	return strings.Join(lines, "\n")
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"parse", "package p\n\ndeny contains msg if {\n\tmsg := \n}\n", "bad.rego:5:1: unexpected } token"},
		{"old syntax", "package p\n\ndeny[msg] {\n\tmsg := \"x\"\n}\n", "bad.rego:3:"},
		{"unsafe var", "package p\n\ndeny contains msg if {\n\tx == 1\n}\n", "bad.rego:3:"},
		{"network builtin", "package p\n\ndeny contains msg if {\n\tr := http.send({\"method\": \"get\", \"url\": \"http://x\"})\n\tmsg := r.body\n}\n", "bad.rego:4:"},
		{"unknown function", "package p\n\nwarn contains msg if {\n\tmsg := nope(1)\n}\n", "bad.rego:4:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"ok.rego": noDelete, "bad.rego": c.src})
			_, err := Load(context.Background(), dir, "policies")
			if err == nil {
				t.Fatal("no error")
			}
			if want := filepath.Join("policies", c.want); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q, want it to start with %s", err, want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
	if _, err := Load(context.Background(), filepath.Join(t.TempDir(), "none"), ""); err == nil {
		t.Error("a missing directory loads")
	}
}

// TestEvaluateErrors: a rule of the wrong shape, or one that fails at
// evaluation, is an error naming the policy, which the daemon turns into
// a denial.
func TestEvaluateErrors(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"boolean deny", "package p\n\ndeny if { true }\n", "policy p: deny: is a boolean"},
		{"numbers", "package p\n\nwarn contains 1 if { true }\n", "policy p: warn: holds a number"},
		{"builtin error", "package p\n\ndeny contains msg if {\n\tmsg := sprintf(\"%d\", [to_number(input.stack)])\n}\n", "policy p: deny: "},
		{"conflict", "package p\n\ndeny := [\"a\"] if input.stack\ndeny := [\"b\"] if input.stack\n", "policy p: deny: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := Load(context.Background(), writeFiles(t, map[string]string{"p.rego": c.src}), "")
			if err != nil {
				t.Fatal(err)
			}
			v, err := set.Evaluate(context.Background(), model.PolicyInput{Stack: "web"})
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("verdict %+v, error %v; want an error starting with %q", v, err, c.want)
			}
			judged := gate.JudgeSteps(context.Background(), set, model.PolicyInput{Stack: "web"})
			if !judged.Denied() || judged.Deny[0].Policy != gate.PolicyEvaluationFailed {
				t.Errorf("judged %+v, want a denial (fail closed)", judged)
			}
		})
	}
}

func TestEvaluateConcurrently(t *testing.T) {
	set, err := Load(context.Background(), writeFiles(t, map[string]string{"files.rego": noDelete}), "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			in := model.PolicyInput{Stack: fmt.Sprint(i), Steps: []model.Step{step("delete", fmt.Sprint(i))}}
			v, err := set.Evaluate(context.Background(), in)
			if err == nil && (len(v.Deny) != 1 || !strings.Contains(v.Deny[0].Message, fmt.Sprintf("File::%d may", i))) {
				err = fmt.Errorf("verdict %+v for stack %d", v, i)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func daemonInput(stack string, steps ...model.Step) model.PolicyInput {
	return model.PolicyInput{Stack: stack, Steps: steps}
}
