package policy

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
)

// TestLiveFailsClosedBeforeALoad: with no policy set loaded, every
// change is denied and the status says why.
func TestLiveFailsClosedBeforeALoad(t *testing.T) {
	l := NewLive("policies", slog.New(slog.DiscardHandler))
	dir := writeFiles(t, map[string]string{"bad.rego": "package p\n\ndeny contains msg if {\n"})
	if err := l.Load(context.Background(), dir, "", ""); err == nil {
		t.Fatal("a broken set loaded")
	}
	v := gate.JudgeSteps(context.Background(), l, model.PolicyInput{Stack: "s"})
	if !v.Denied() || !strings.Contains(v.Deny[0].Message, "no policies are loaded from policies: "+filepath.Join(dir, "bad.rego")+":4:0: unexpected eof") {
		t.Errorf("verdict %+v, want a denial naming the broken file", v)
	}
	if st := l.PolicyStatus(); st.Successful || !strings.Contains(st.Error, "bad.rego:4:0:") || st.LastAttempt.IsZero() {
		t.Errorf("status %+v", st)
	}
}

// TestLiveReloads: a saved change is in force within the debounce; a
// broken save keeps the set before and shows the error; fixing it
// applies it.
func TestLiveReloads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := writeFiles(t, map[string]string{"files.rego": noDelete})
	l := NewLive(dir, slog.New(slog.DiscardHandler))
	if err := l.Load(ctx, dir, "", ""); err != nil {
		t.Fatal(err)
	}
	done, err := l.Watch(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	deletes := model.PolicyInput{Stack: "s", Steps: []model.Step{step("delete", "a")}}
	denied := func() bool {
		v, err := l.Evaluate(ctx, deletes)
		if err != nil {
			t.Fatal(err)
		}
		return v.Denied()
	}
	if !denied() {
		t.Fatal("a delete is allowed")
	}
	write := func(name, src string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as an editor saves
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func(model.PolicyStatus) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(l.PolicyStatus()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, l.PolicyStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A broken save: the set before stays in force.
	write("files.rego", "package stackd.files\n\ndeny contains msg if {\n\tmsg := \n}\n")
	waitFor("a broken policy", func(st model.PolicyStatus) bool { return !st.Successful })
	if st := l.PolicyStatus(); !strings.HasPrefix(st.Error, filepath.Join(dir, "files.rego")+":5:1:") ||
		strings.Join(st.Policies, ",") != "stackd.files" {
		t.Errorf("status after a broken save %+v", st)
	}
	if !denied() {
		t.Error("after a broken save the policies before are not in force")
	}

	// Fixed, and a new policy in a new subdirectory.
	write("files.rego", "package stackd.files\n\nwarn contains \"deleted\" if { some s in input.steps; s.op == \"delete\" }\n")
	write("more/imports.rego", "package stackd.imports\n\ndeny contains \"no imports\" if { some s in input.steps; s.op == \"import\" }\n")
	waitFor("the fixed policies", func(st model.PolicyStatus) bool {
		return st.Successful && strings.Join(st.Policies, ",") == "stackd.files,stackd.imports"
	})
	if denied() {
		t.Error("a delete is still denied after the policy became a warning")
	}
}
